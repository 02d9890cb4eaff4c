//! A synchronous client of the Kubernetes API: paginated lists and watch streams (read line by
//! line on the calling thread) of any collection cluster mode watches (Nodes; NetworkPolicies,
//! Namespaces and Pods for policy), and the get and patches of this node's Node and its status.

use std::io::{BufRead, BufReader, Read};
use std::time::Duration;

use ureq::tls::{RootCerts, TlsConfig};
use ureq::Agent;

use super::credentials::Endpoint;
use super::error::ApiError;
use super::node_object::{Meta, Node, Status, WatchEvent};

/// Where Nodes are.
pub const NODES: &str = "/api/v1/nodes";

/// Objects per list page: bounds the memory a list takes while it is read.
const PAGE: usize = 500;
/// How long the API server keeps a watch open before ending it (it is then resumed).
pub const WATCH_SECONDS: u64 = 290;
/// Longest silence on a watch before the connection is taken for dead: the API server sends
/// bookmarks about every minute, and ends the watch after [`WATCH_SECONDS`].
const WATCH_SILENCE: Duration = Duration::from_secs(120);
/// Largest body knid reads (a list page, an error), and largest watch event.
const BODY_LIMIT: u64 = 64 << 20;
/// Each of a connection's four buffers (in and out, of its HTTP and of its TLS layer; ureq's
/// default is 128 KiB), filled with zeros when the connection opens, and so resident for as
/// long as it lives: the watches' connections live for good, and 128 KiB made each of them
/// 0.5 MiB of knid's RSS. The HTTP input buffer must hold a whole response header (the API
/// server's are well under 1 KiB) and the output one a whole request header (its bearer
/// token, a JWT of 1 to 2 KiB); reads and writes of bodies and of TLS records go through in
/// as many pieces as needed.
const CONNECTION_BUFFER: usize = 16 * 1024;

/// The content type of a strategic merge patch (a Node's conditions merge by `type`).
pub const STRATEGIC_MERGE_PATCH: &str = "application/strategic-merge-patch+json";
/// The content type of an RFC 6902 JSON patch.
pub const JSON_PATCH: &str = "application/json-patch+json";

/// A list page of any kind.
#[derive(Debug, serde::Deserialize)]
struct Page<T> {
    #[serde(default)]
    metadata: Meta,
    #[serde(default = "Vec::new")]
    items: Vec<T>,
}

/// An API client.
pub struct Client {
    agent: Agent,
    endpoint: Endpoint,
}

impl Client {
    /// A client of `endpoint`; makes no request.
    pub fn new(endpoint: Endpoint) -> Client {
        let tls = TlsConfig::builder()
            .root_certs(RootCerts::new_with_certs(&endpoint.ca))
            .client_cert(endpoint.client_cert.clone())
            .build();
        let agent = Agent::config_builder()
            .tls_config(tls)
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(5)))
            .timeout_recv_response(Some(Duration::from_secs(30)))
            .max_idle_connections(2)
            .input_buffer_size(CONNECTION_BUFFER)
            .output_buffer_size(CONNECTION_BUFFER)
            .user_agent(concat!("knid/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Client { agent, endpoint }
    }

    /// The API server's address.
    pub fn server(&self) -> &str {
        &self.endpoint.server
    }

    fn get(
        &self,
        path: &str,
        what: &str,
        query: &[(&str, &str)],
        per_read: Option<Duration>,
    ) -> Result<ureq::Body, ApiError> {
        let url = format!("{}{path}", self.endpoint.server);
        let mut request = self
            .agent
            .get(&url)
            .header("Accept", "application/json")
            .query_pairs(query.iter().copied());
        if let Some(token) = &self.endpoint.token {
            request = request.header("Authorization", format!("Bearer {}", token.value()?));
        }
        let request = request.config().timeout_per_read(per_read).build();
        let response = request.call().map_err(|source| ApiError::Http {
            what: what.to_owned(),
            source,
        })?;
        answer(response, what)
    }

    /// The Node called `name`.
    pub fn get_node(&self, name: &str) -> Result<Node, ApiError> {
        let what = format!("get node {name}");
        let url = format!("{}/api/v1/nodes/{name}", self.endpoint.server);
        let mut request = self.agent.get(&url).header("Accept", "application/json");
        if let Some(token) = &self.endpoint.token {
            request = request.header("Authorization", format!("Bearer {}", token.value()?));
        }
        let response = request.call().map_err(|source| ApiError::Http {
            what: what.clone(),
            source,
        })?;
        read_json(answer(response, &what)?, &what)
    }

    /// Patches Node `name` (its `status` subresource with `status`) with `patch` of
    /// `content_type` ([`STRATEGIC_MERGE_PATCH`] or [`JSON_PATCH`]); the Node as patched.
    /// Unknown fields are refused (`fieldValidation=Strict`), not dropped with a warning.
    pub fn patch_node(
        &self,
        name: &str,
        status: bool,
        content_type: &str,
        patch: &serde_json::Value,
    ) -> Result<Node, ApiError> {
        let what = format!("patch node {name}{}", if status { " status" } else { "" });
        let url = format!(
            "{}/api/v1/nodes/{name}{}",
            self.endpoint.server,
            if status { "/status" } else { "" }
        );
        let mut request = self
            .agent
            .patch(&url)
            .header("Accept", "application/json")
            .content_type(content_type)
            .query("fieldValidation", "Strict");
        if let Some(token) = &self.endpoint.token {
            request = request.header("Authorization", format!("Bearer {}", token.value()?));
        }
        let response = request
            .send(patch.to_string())
            .map_err(|source| ApiError::Http {
                what: what.clone(),
                source,
            })?;
        read_json(answer(response, &what)?, &what)
    }
}

/// The body of a 200 answer, or the error its Status says.
fn answer(response: ureq::http::Response<ureq::Body>, what: &str) -> Result<ureq::Body, ApiError> {
    let code = response.status().as_u16();
    let body = response.into_body();
    if code != 200 {
        let status: Status = read_json(body, what).unwrap_or_default();
        return Err(ApiError::Status {
            what: what.to_owned(),
            code,
            reason: status.reason,
            message: status.message,
        });
    }
    Ok(body)
}

impl Client {
    /// Every object of the collection at `path` (`what` names it in errors), page by page:
    /// `each` gets each page's items; returns the list's resource version.
    pub fn list<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        what: &str,
        mut each: impl FnMut(T),
    ) -> Result<String, ApiError> {
        let limit = PAGE.to_string();
        let mut next: Option<String> = None;
        let what = format!("list {what}");
        loop {
            let mut query = vec![("limit", limit.as_str())];
            if let Some(token) = next.as_deref() {
                query.push(("continue", token));
            }
            let page: Page<T> = read_json(self.get(path, &what, &query, None)?, &what)?;
            page.items.into_iter().for_each(&mut each);
            match page.metadata.next.filter(|t| !t.is_empty()) {
                Some(token) => next = Some(token),
                None => return Ok(page.metadata.resource_version),
            }
        }
    }

    /// A watch of the collection at `path` from `resource_version`, with bookmarks.
    pub fn watch(&self, path: &str, what: &str, resource_version: &str) -> Result<Watch, ApiError> {
        let timeout = WATCH_SECONDS.to_string();
        let what = format!("watch {what}");
        let body = self.get(
            path,
            &what,
            &[
                ("watch", "true"),
                ("resourceVersion", resource_version),
                ("allowWatchBookmarks", "true"),
                ("timeoutSeconds", &timeout),
            ],
            Some(WATCH_SILENCE),
        )?;
        Ok(Watch {
            lines: BufReader::new(Box::new(body.into_reader())),
            line: String::new(),
            what,
        })
    }
}

fn read_json<T: serde::de::DeserializeOwned>(body: ureq::Body, what: &str) -> Result<T, ApiError> {
    let reader = body.into_with_config().limit(BODY_LIMIT).reader();
    serde_json::from_reader(reader).map_err(|e| ApiError::Decode {
        what: what.to_owned(),
        why: e.to_string(),
    })
}

/// An open watch stream: one JSON event per line.
pub struct Watch {
    lines: BufReader<Box<dyn Read + Send>>,
    line: String,
    what: String,
}

impl Watch {
    /// The next event; `None` when the API server ended the stream.
    pub fn next_event(&mut self) -> Result<Option<WatchEvent>, ApiError> {
        loop {
            self.line.clear();
            let n = (&mut self.lines)
                .take(BODY_LIMIT)
                .read_line(&mut self.line)
                .map_err(|e| ApiError::Decode {
                    what: self.what.clone(),
                    why: format!("read the stream: {e}"),
                })?;
            if n == 0 {
                return Ok(None);
            }
            if !self.line.ends_with('\n') && n as u64 == BODY_LIMIT {
                return Err(ApiError::Decode {
                    what: self.what.clone(),
                    why: format!("an event is longer than {BODY_LIMIT} bytes"),
                });
            }
            if self.line.trim().is_empty() {
                continue;
            }
            return serde_json::from_str(&self.line)
                .map(Some)
                .map_err(|e| ApiError::Decode {
                    what: self.what.clone(),
                    why: e.to_string(),
                });
        }
    }
}

#[cfg(test)]
mod tests;
