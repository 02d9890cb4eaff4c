//! NetworkPolicies as kube-apiserver takes them in and serves them: the spec a test gives,
//! decoded strictly (an unknown field or a wrong type is refused, as `kubectl apply` with its
//! default `--validate=strict` is), defaulted (`policyTypes`, each port's `protocol`), and
//! serialised with Go's `omitempty` (an empty `ingress: []` is not written back).

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::cluster::Assigned;

/// A NetworkPolicy's spec, decoded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct PolicySpec {
    /// An absent `podSelector` decodes as the empty one (every pod), as Go's non-pointer field.
    pub pod_selector: Selector,
    pub ingress: Vec<Rule>,
    pub egress: Vec<Rule>,
    pub policy_types: Vec<String>,
}

/// An ingress rule (`from`) or an egress rule (`to`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Rule {
    pub ports: Vec<Port>,
    pub peers: Vec<Peer>,
}

/// A `NetworkPolicyPort`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Port {
    pub protocol: Option<String>,
    pub port: Option<PortValue>,
    pub end_port: Option<i64>,
}

/// An `IntOrString` port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum PortValue {
    Number(i64),
    Name(String),
}

/// A `NetworkPolicyPeer`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Peer {
    pub pod_selector: Option<Selector>,
    pub namespace_selector: Option<Selector>,
    pub ip_block: Option<IpBlock>,
}

/// A `LabelSelector`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Selector {
    pub match_labels: BTreeMap<String, String>,
    pub match_expressions: Vec<Requirement>,
}

/// A `LabelSelectorRequirement`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Requirement {
    pub key: String,
    pub operator: String,
    pub values: Vec<String>,
}

/// An `IPBlock`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct IpBlock {
    pub cidr: String,
    pub except: Vec<String>,
}

/// Decodes `spec` as the real server decodes a NetworkPolicy's: the message of its 400 answer
/// when it cannot.
pub(super) fn decode(spec: &Value) -> Result<PolicySpec, String> {
    let fields = Fields::root(spec).map_err(|e| {
        format!("NetworkPolicy in version \"v1\" cannot be handled as a NetworkPolicy: {e}")
    })?;
    fields.spec().map_err(|e| {
        format!("NetworkPolicy in version \"v1\" cannot be handled as a NetworkPolicy: {e}")
    })
}

/// The real server's defaulting (`SetDefaults_NetworkPolicySpec`): every port's protocol is
/// TCP unless given; without `policyTypes`, Ingress, and Egress when there are egress rules.
pub(super) fn apply_defaults(spec: &mut PolicySpec) {
    for rule in spec.ingress.iter_mut().chain(spec.egress.iter_mut()) {
        for port in &mut rule.ports {
            port.protocol.get_or_insert_with(|| "TCP".into());
        }
    }
    if spec.policy_types.is_empty() {
        spec.policy_types.push("Ingress".into());
        if !spec.egress.is_empty() {
            spec.policy_types.push("Egress".into());
        }
    }
}

/// The NetworkPolicy `namespace/name` with `spec`: `metadata.generation` starts at 1 and grows
/// when the spec changes from `previous`'s.
pub(super) fn render(
    namespace: &str,
    name: &str,
    spec: &PolicySpec,
    meta: &Assigned,
    previous: Option<&Value>,
) -> Value {
    let spec = spec_json(spec);
    let generation = match previous {
        None => 1,
        Some(previous) => {
            let generation = previous["metadata"]["generation"].as_u64().unwrap_or(1);
            generation + u64::from(previous["spec"] != spec)
        }
    };
    json!({
        "kind": "NetworkPolicy",
        "apiVersion": "networking.k8s.io/v1",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": meta.uid,
            "resourceVersion": meta.resource_version.to_string(),
            "generation": generation,
            "creationTimestamp": meta.created,
        },
        "spec": spec,
    })
}

fn spec_json(spec: &PolicySpec) -> Value {
    let mut out = Map::new();
    out.insert("podSelector".into(), selector_json(&spec.pod_selector));
    insert_list(
        &mut out,
        "ingress",
        spec.ingress.iter().map(|r| rule_json(r, "from")),
    );
    insert_list(
        &mut out,
        "egress",
        spec.egress.iter().map(|r| rule_json(r, "to")),
    );
    insert_list(
        &mut out,
        "policyTypes",
        spec.policy_types.iter().map(|t| json!(t)),
    );
    Value::Object(out)
}

fn rule_json(rule: &Rule, peers: &str) -> Value {
    let mut out = Map::new();
    insert_list(&mut out, "ports", rule.ports.iter().map(port_json));
    insert_list(&mut out, peers, rule.peers.iter().map(peer_json));
    Value::Object(out)
}

fn port_json(port: &Port) -> Value {
    let mut out = Map::new();
    if let Some(protocol) = &port.protocol {
        out.insert("protocol".into(), json!(protocol));
    }
    match &port.port {
        Some(PortValue::Number(number)) => out.insert("port".into(), json!(number)),
        Some(PortValue::Name(name)) => out.insert("port".into(), json!(name)),
        None => None,
    };
    if let Some(end_port) = port.end_port {
        out.insert("endPort".into(), json!(end_port));
    }
    Value::Object(out)
}

fn peer_json(peer: &Peer) -> Value {
    let mut out = Map::new();
    if let Some(selector) = &peer.pod_selector {
        out.insert("podSelector".into(), selector_json(selector));
    }
    if let Some(selector) = &peer.namespace_selector {
        out.insert("namespaceSelector".into(), selector_json(selector));
    }
    if let Some(block) = &peer.ip_block {
        let mut ip_block = Map::new();
        ip_block.insert("cidr".into(), json!(block.cidr));
        insert_list(
            &mut ip_block,
            "except",
            block.except.iter().map(|c| json!(c)),
        );
        out.insert("ipBlock".into(), Value::Object(ip_block));
    }
    Value::Object(out)
}

fn selector_json(selector: &Selector) -> Value {
    let mut out = Map::new();
    if !selector.match_labels.is_empty() {
        out.insert("matchLabels".into(), json!(selector.match_labels));
    }
    let expressions = selector.match_expressions.iter().map(|r| {
        let mut requirement = json!({"key": r.key, "operator": r.operator});
        if !r.values.is_empty() {
            requirement["values"] = json!(r.values);
        }
        requirement
    });
    insert_list(&mut out, "matchExpressions", expressions);
    Value::Object(out)
}

/// Inserts the list under `key` unless it is empty, as Go's `omitempty`.
fn insert_list(out: &mut Map<String, Value>, key: &str, items: impl Iterator<Item = Value>) {
    let items: Vec<Value> = items.collect();
    if !items.is_empty() {
        out.insert(key.into(), Value::Array(items));
    }
}

/// A JSON object being decoded as a Go struct: its fields, where it is, and the struct's name
/// for the messages.
struct Fields<'v> {
    map: &'v Map<String, Value>,
    path: String,
    go_struct: &'static str,
}

impl<'v> Fields<'v> {
    /// The spec itself.
    fn root(spec: &'v Value) -> Result<Fields<'v>, String> {
        let allowed = ["podSelector", "ingress", "egress", "policyTypes"];
        Fields::of(spec, "spec".into(), "NetworkPolicySpec", &allowed)?.ok_or_else(|| {
            "json: cannot unmarshal null into Go struct field NetworkPolicy.spec of type \
             v1.NetworkPolicySpec"
                .to_string()
        })
    }

    /// `value` at `path` as struct `go_struct` with the fields `allowed`; `None` for null.
    fn of(
        value: &'v Value,
        path: String,
        go_struct: &'static str,
        allowed: &[&str],
    ) -> Result<Option<Fields<'v>>, String> {
        let map = match value {
            Value::Null => return Ok(None),
            Value::Object(map) => map,
            other => {
                return Err(format!(
                    "json: cannot unmarshal {} into Go value of type v1.{go_struct} (at {path})",
                    json_type(other)
                ))
            }
        };
        if let Some(unknown) = map.keys().find(|key| !allowed.contains(&key.as_str())) {
            return Err(format!(
                "strict decoding error: unknown field \"{path}.{unknown}\""
            ));
        }
        Ok(Some(Fields {
            map,
            path,
            go_struct,
        }))
    }

    fn spec(&self) -> Result<PolicySpec, String> {
        let pod_selector = self.selector("podSelector")?.unwrap_or_default();
        let ingress = self.rules("ingress", "NetworkPolicyIngressRule", "from")?;
        let egress = self.rules("egress", "NetworkPolicyEgressRule", "to")?;
        let policy_types = self.strings("policyTypes", "[]v1.PolicyType")?;
        Ok(PolicySpec {
            pod_selector,
            ingress,
            egress,
            policy_types,
        })
    }

    fn rules(
        &self,
        key: &str,
        go_struct: &'static str,
        peers_key: &str,
    ) -> Result<Vec<Rule>, String> {
        let mut rules = Vec::new();
        for rule in self.objects(key, go_struct, &["ports", peers_key])? {
            let Some(rule) = rule else {
                rules.push(Rule::default());
                continue;
            };
            let mut ports = Vec::new();
            for port in rule.objects(
                "ports",
                "NetworkPolicyPort",
                &["protocol", "port", "endPort"],
            )? {
                ports.push(match port {
                    Some(port) => port.port()?,
                    None => Port::default(),
                });
            }
            let mut peers = Vec::new();
            let allowed = ["podSelector", "namespaceSelector", "ipBlock"];
            for peer in rule.objects(peers_key, "NetworkPolicyPeer", &allowed)? {
                peers.push(match peer {
                    Some(peer) => peer.peer()?,
                    None => Peer::default(),
                });
            }
            rules.push(Rule { ports, peers });
        }
        Ok(rules)
    }

    fn port(&self) -> Result<Port, String> {
        let port = match self.field("port") {
            None => None,
            Some(Value::String(name)) => Some(PortValue::Name(name.clone())),
            Some(number @ Value::Number(_)) => Some(PortValue::Number(self.int32(
                "port",
                number,
                "intstr.IntOrString",
            )?)),
            Some(other) => return Err(self.mismatch("port", other, "intstr.IntOrString")),
        };
        let end_port = match self.field("endPort") {
            None => None,
            Some(value) => Some(self.int32("endPort", value, "int32")?),
        };
        Ok(Port {
            protocol: self.string("protocol", "v1.Protocol")?,
            port,
            end_port,
        })
    }

    fn peer(&self) -> Result<Peer, String> {
        let ip_block = match self.field("ipBlock") {
            None => None,
            Some(value) => {
                let path = format!("{}.ipBlock", self.path);
                Fields::of(value, path, "IPBlock", &["cidr", "except"])?
                    .map(|block| -> Result<IpBlock, String> {
                        Ok(IpBlock {
                            cidr: block.string("cidr", "string")?.unwrap_or_default(),
                            except: block.strings("except", "[]string")?,
                        })
                    })
                    .transpose()?
            }
        };
        Ok(Peer {
            pod_selector: self.selector("podSelector")?,
            namespace_selector: self.selector("namespaceSelector")?,
            ip_block,
        })
    }

    fn selector(&self, key: &str) -> Result<Option<Selector>, String> {
        let Some(value) = self.field(key) else {
            return Ok(None);
        };
        let path = format!("{}.{key}", self.path);
        let allowed = ["matchLabels", "matchExpressions"];
        let Some(fields) = Fields::of(value, path, "LabelSelector", &allowed)? else {
            return Ok(None);
        };
        let match_labels = match fields.field("matchLabels") {
            None => BTreeMap::new(),
            Some(Value::Object(labels)) => labels
                .iter()
                .map(|(label, value)| match value {
                    Value::String(value) => Ok((label.clone(), value.clone())),
                    other => Err(fields.mismatch("matchLabels", other, "string")),
                })
                .collect::<Result<_, _>>()?,
            Some(other) => return Err(fields.mismatch("matchLabels", other, "map[string]string")),
        };
        let mut match_expressions = Vec::new();
        let allowed = ["key", "operator", "values"];
        for requirement in
            fields.objects("matchExpressions", "LabelSelectorRequirement", &allowed)?
        {
            let Some(requirement) = requirement else {
                match_expressions.push(Requirement::default());
                continue;
            };
            match_expressions.push(Requirement {
                key: requirement.string("key", "string")?.unwrap_or_default(),
                operator: requirement
                    .string("operator", "v1.LabelSelectorOperator")?
                    .unwrap_or_default(),
                values: requirement.strings("values", "[]string")?,
            });
        }
        Ok(Some(Selector {
            match_labels,
            match_expressions,
        }))
    }

    /// The field `key`, unless absent or null (which Go decodes as absent).
    fn field(&self, key: &str) -> Option<&'v Value> {
        self.map.get(key).filter(|value| !value.is_null())
    }

    /// The objects in the list `key`, each as `go_struct` (`None` for a null item).
    fn objects(
        &self,
        key: &str,
        go_struct: &'static str,
        allowed: &[&str],
    ) -> Result<Vec<Option<Fields<'v>>>, String> {
        match self.field(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    let path = format!("{}.{key}[{i}]", self.path);
                    Fields::of(item, path, go_struct, allowed)
                })
                .collect(),
            Some(other) => Err(self.mismatch(key, other, &format!("[]v1.{go_struct}"))),
        }
    }

    fn string(&self, key: &str, go_type: &str) -> Result<Option<String>, String> {
        match self.field(key) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(other) => Err(self.mismatch(key, other, go_type)),
        }
    }

    fn strings(&self, key: &str, go_type: &str) -> Result<Vec<String>, String> {
        match self.field(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| match item {
                    Value::String(text) => Ok(text.clone()),
                    Value::Null => Ok(String::new()),
                    other => Err(self.mismatch(key, other, go_type)),
                })
                .collect(),
            Some(other) => Err(self.mismatch(key, other, go_type)),
        }
    }

    fn int32(&self, key: &str, value: &Value, go_type: &str) -> Result<i64, String> {
        value
            .as_i64()
            .filter(|n| i32::try_from(*n).is_ok())
            .ok_or_else(|| self.mismatch(key, value, go_type))
    }

    /// Go's message for a JSON value of the wrong type.
    fn mismatch(&self, key: &str, found: &Value, go_type: &str) -> String {
        format!(
            "json: cannot unmarshal {} into Go struct field {}.{}.{key} of type {go_type}",
            json_type(found),
            self.go_struct,
            without_indices(&self.path)
        )
    }
}

/// How Go's decoder names a JSON value in its type errors.
fn json_type(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(_) => "bool".into(),
        Value::Number(number) => format!("number {number}"),
        Value::String(_) => "string".into(),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
    }
}

/// `spec.ingress[0].ports` as Go's type errors write it: `spec.ingress.ports`.
fn without_indices(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => in_index = true,
            ']' => in_index = false,
            c if !in_index => out.push(c),
            _ => {}
        }
    }
    out
}
