/*
 * A CNI plugin that does no work: the floor of one plugin call through libcni, which the perf
 * bench times beside knid-cni's (testkit/src/libcni.rs builds it, static, with musl's
 * compiler). It reads its configuration to the end, as a plugin must, and answers ADD with a
 * result that holds nothing but the CNI version the bench's configuration names; any other
 * command succeeds silently.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(void) {
    char buf[4096];
    while (read(0, buf, sizeof buf) > 0) {
    }
    const char *command = getenv("CNI_COMMAND");
    if (command != NULL && strcmp(command, "ADD") == 0) {
        static const char result[] = "{\"cniVersion\":\"1.0.0\"}\n";
        if (write(1, result, sizeof result - 1) != (ssize_t)(sizeof result - 1)) {
            return 1;
        }
    }
    return 0;
}
