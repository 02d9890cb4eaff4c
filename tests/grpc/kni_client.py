"""A gRPC client of knid-grpc built only from grpcio and the stubs grpcio-tools generates from
knid's .proto files at start (knid's own code plays no part in it), for tests/grpc.rs.

    python kni_client.py <proto root> <stub dir> <unix socket path | host:port> [<uid>:<gid>]

One call per stdin line, one answer per stdout line, all on one channel (one HTTP/2 connection,
as a kubelet holds):
    in:  {"call": "kni.KNI/AttachInterface", "request": "<hex protobuf>", "timeout": 2.5}
    out: {"code": "OK", "details": "", "response": "<hex protobuf>", "ms": 3.1}
The request bytes are parsed into the generated request class and the stub sends that message;
the response message the stub returns is serialized back. "timeout" (seconds) is the gRPC
deadline; null for none. With <uid>:<gid>, the client drops to that user once its stubs are
loaded, before it connects.

The channel's :authority is "localhost", as grpc-go (the kubelet, containerd) sends for a unix
socket: grpcio sends the socket's path, percent-encoded, which HTTP/2 servers that check the
header (tonic's h2, knid-grpc's) refuse (grpc/grpc#38142).
"""

import importlib
import json
import os
import sys
import time

import grpc
from grpc_tools import protoc

PROTOS = {
    # service -> (.proto under the root, generated module prefix, stub class)
    "kni.KNI": ("kni/beta/kni.proto", "kni.beta.kni", "KNIStub"),
    "knid.v1.Runtime": ("knid/v1/runtime.proto", "knid.v1.runtime", "RuntimeStub"),
}


def generate(root, out):
    for proto, _, _ in PROTOS.values():
        args = ["grpc_tools.protoc", "-I" + root, "--python_out=" + out, "--grpc_python_out=" + out, proto]
        if protoc.main(args) != 0:
            sys.exit("protoc failed on " + proto)
    for dirpath, _, files in os.walk(out):
        if "__init__.py" not in files:
            open(os.path.join(dirpath, "__init__.py"), "w").close()
    sys.path.insert(0, out)


def stubs(channel):
    found = {}
    for service, (_, module, stub) in PROTOS.items():
        pb2 = importlib.import_module(module + "_pb2")
        pb2_grpc = importlib.import_module(module + "_pb2_grpc")
        name = service.split(".")[-1]
        found[service] = (pb2, pb2.DESCRIPTOR.services_by_name[name], getattr(pb2_grpc, stub)(channel))
    return found


def call(found, line):
    ask = json.loads(line)
    service, method = ask["call"].split("/")
    pb2, descriptor, stub = found[service]
    request_class = getattr(pb2, descriptor.methods_by_name[method].input_type.name)
    request = request_class.FromString(bytes.fromhex(ask["request"]))
    started = time.monotonic()
    try:
        response = getattr(stub, method)(request, timeout=ask.get("timeout"))
        answer = {"code": "OK", "details": "", "response": response.SerializeToString().hex()}
    except grpc.RpcError as e:
        answer = {"code": e.code().name, "details": e.details() or "", "response": ""}
    answer["ms"] = (time.monotonic() - started) * 1000.0
    return answer


def main():
    root, out, socket = sys.argv[1], sys.argv[2], sys.argv[3]
    generate(root, out)
    target = "unix://" + socket if socket.startswith("/") else socket
    channel = grpc.insecure_channel(target, options=[("grpc.default_authority", "localhost")])
    found = stubs(channel)
    if len(sys.argv) > 4:
        uid, gid = (int(n) for n in sys.argv[4].split(":"))
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(call(found, line)), flush=True)


if __name__ == "__main__":
    main()
