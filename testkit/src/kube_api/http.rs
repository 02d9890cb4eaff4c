//! A small, strict HTTP/1.1 server side: the request head parser, query strings, and the
//! responses the stand-in sends (whole bodies, or the chunked stream of a watch).

use std::io::{self, BufRead, Read, Write};

/// The most a request head (request line and headers) may take.
const MAX_HEAD: u64 = 16 * 1024;
/// The most headers a request may have.
const MAX_HEADERS: usize = 64;
/// The largest request body read.
const MAX_BODY: u64 = 64 * 1024;

/// A request's line and headers.
#[derive(Debug)]
pub(super) struct Head {
    pub method: String,
    /// The path, still percent-encoded.
    pub path: String,
    /// The raw query string, without the `?` (empty when none).
    pub query: String,
    pub headers: Vec<(String, String)>,
    /// The body (empty without a `Content-Length`).
    pub body: Vec<u8>,
}

impl Head {
    /// The first value of header `name` (case-insensitive).
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether the client asked to close the connection after this request.
    pub(super) fn wants_close(&self) -> bool {
        self.header("connection")
            .is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")))
    }
}

/// Why no request could be read.
#[derive(Debug)]
pub(super) enum ReadError {
    /// The client closed the connection between requests.
    Closed,
    /// The connection failed, timed out, or ended mid-request.
    Io,
    /// The bytes are not a request this server accepts: answer with this status and close.
    Bad(u16, &'static str),
}

impl From<io::Error> for ReadError {
    fn from(_: io::Error) -> Self {
        ReadError::Io
    }
}

/// Reads one request head, and any body.
pub(super) fn read_request(reader: &mut impl BufRead) -> Result<Head, ReadError> {
    let mut budget = MAX_HEAD;
    let request_line = match read_line(reader, &mut budget)? {
        None => return Err(ReadError::Closed),
        Some(line) => line,
    };
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(ReadError::Bad(400, "malformed request line"));
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(ReadError::Bad(400, "malformed method"));
    }
    if version != "HTTP/1.1" {
        return Err(ReadError::Bad(505, "only HTTP/1.1 is served"));
    }
    if !target.starts_with('/') || target.bytes().any(|b| !b.is_ascii_graphic()) {
        return Err(ReadError::Bad(400, "malformed request target"));
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));

    let mut headers = Vec::new();
    loop {
        let Some(line) = read_line(reader, &mut budget)? else {
            return Err(ReadError::Io);
        };
        if line.is_empty() {
            break;
        }
        if headers.len() == MAX_HEADERS {
            return Err(ReadError::Bad(431, "too many headers"));
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(ReadError::Bad(400, "malformed header"));
        };
        // No whitespace before the colon, and no obsolete line folding (HTTP/1.1 message syntax).
        if name.is_empty() || !name.bytes().all(is_token_byte) {
            return Err(ReadError::Bad(400, "malformed header name"));
        }
        headers.push((
            name.to_string(),
            value.trim_matches([' ', '\t']).to_string(),
        ));
    }
    let mut head = Head {
        method: method.to_string(),
        path: path.to_string(),
        query: query.to_string(),
        headers,
        body: Vec::new(),
    };
    if head.header("host").is_none() {
        return Err(ReadError::Bad(400, "missing Host header"));
    }
    if head.header("transfer-encoding").is_some() {
        return Err(ReadError::Bad(
            400,
            "request bodies must have a Content-Length",
        ));
    }
    if let Some(length) = head.header("content-length") {
        let Ok(length) = length.parse::<u64>() else {
            return Err(ReadError::Bad(400, "malformed Content-Length"));
        };
        if length > MAX_BODY {
            return Err(ReadError::Bad(413, "request body too large"));
        }
        let mut body = Vec::new();
        let copied = (&mut *reader).take(length).read_to_end(&mut body)?;
        if (copied as u64) < length {
            return Err(ReadError::Io);
        }
        head.body = body;
    }
    Ok(head)
}

/// One CRLF-terminated line, without the CRLF; `None` at a clean end of stream before any byte.
fn read_line(reader: &mut impl BufRead, budget: &mut u64) -> Result<Option<String>, ReadError> {
    let mut line = Vec::new();
    let read = (&mut *reader).take(*budget).read_until(b'\n', &mut line)?;
    *budget -= read as u64;
    if read == 0 {
        if *budget == 0 {
            return Err(ReadError::Bad(431, "request head too large"));
        }
        return Ok(None);
    }
    if !line.ends_with(b"\n") {
        if *budget == 0 {
            return Err(ReadError::Bad(431, "request head too large"));
        }
        return Err(ReadError::Io);
    }
    if !line.ends_with(b"\r\n") {
        return Err(ReadError::Bad(400, "lines must end with CRLF"));
    }
    line.truncate(line.len() - 2);
    String::from_utf8(line)
        .map(Some)
        .map_err(|_| ReadError::Bad(400, "request head is not UTF-8"))
}

/// RFC 9110's `tchar`.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The `(name, value)` pairs of a query string, percent-decoded (`+` is a space, as Go's
/// `url.ParseQuery` reads it); `None` if an escape is malformed.
pub(super) fn parse_query(query: &str) -> Option<Vec<(String, String)>> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            Some((percent_decode(name)?, percent_decode(value)?))
        })
        .collect()
}

/// Decodes `%XX` escapes and `+`; `None` if an escape is malformed or the result not UTF-8.
pub(super) fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        410 => "Gone",
        409 => "Conflict",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Entity",
        431 => "Request Header Fields Too Large",
        505 => "HTTP Version Not Supported",
        _ => "Unknown",
    }
}

/// A whole JSON response.
pub(super) fn write_response(
    out: &mut impl Write,
    status: u16,
    body: &str,
    close: bool,
) -> io::Result<()> {
    let connection = if close { "Connection: close\r\n" } else { "" };
    let head = format!(
        "HTTP/1.1 {status} {}\r\nCache-Control: no-cache, private\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n{connection}\r\n",
        reason_phrase(status),
        body.len()
    );
    out.write_all(head.as_bytes())?;
    out.write_all(body.as_bytes())?;
    out.flush()
}

/// The head of a watch: 200, JSON, chunked.
pub(super) fn write_stream_head(out: &mut impl Write, close: bool) -> io::Result<()> {
    let connection = if close { "Connection: close\r\n" } else { "" };
    let head = format!(
        "HTTP/1.1 200 OK\r\nCache-Control: no-cache, private\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n{connection}\r\n"
    );
    out.write_all(head.as_bytes())?;
    out.flush()
}

/// Appends `data` to `buf` as one chunk.
pub(super) fn push_chunk(buf: &mut Vec<u8>, data: &[u8]) {
    if data.is_empty() {
        return; // An empty chunk would end the body.
    }
    buf.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
    buf.extend_from_slice(data);
    buf.extend_from_slice(b"\r\n");
}

/// The zero-length chunk that ends a chunked body cleanly.
pub(super) const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> Result<Head, ReadError> {
        read_request(&mut io::BufReader::new(bytes))
    }

    fn status_of(bytes: &[u8]) -> u16 {
        match parse(bytes) {
            Err(ReadError::Bad(status, _)) => status,
            other => panic!("expected a rejection, got {other:?}"),
        }
    }

    #[test]
    fn a_get_with_query_and_headers_parses() {
        let head = parse(b"GET /api/v1/nodes?watch=1&limit=2 HTTP/1.1\r\nHost: x\r\nAuthorization:  Bearer t \r\n\r\n")
            .expect("parses");
        assert_eq!(head.method, "GET");
        assert_eq!(head.path, "/api/v1/nodes");
        assert_eq!(head.query, "watch=1&limit=2");
        assert_eq!(head.header("AUTHORIZATION"), Some("Bearer t"));
        assert!(!head.wants_close());
    }

    #[test]
    fn a_body_is_skipped_so_the_next_request_parses() {
        let mut reader =
            io::BufReader::new(&b"GET /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET /b HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, close\r\n\r\n"[..]);
        assert_eq!(read_request(&mut reader).expect("first").path, "/a");
        let second = read_request(&mut reader).expect("second");
        assert_eq!(second.path, "/b");
        assert!(second.wants_close());
        assert!(matches!(read_request(&mut reader), Err(ReadError::Closed)));
    }

    #[test]
    fn malformed_requests_are_refused_with_their_status() {
        assert_eq!(status_of(b"GET /a HTTP/1.0\r\nHost: x\r\n\r\n"), 505);
        assert_eq!(status_of(b"GET  /a HTTP/1.1\r\nHost: x\r\n\r\n"), 400);
        assert_eq!(status_of(b"get /a HTTP/1.1\r\nHost: x\r\n\r\n"), 400);
        assert_eq!(status_of(b"GET /a HTTP/1.1\r\n\r\n"), 400, "no Host");
        assert_eq!(status_of(b"GET /a HTTP/1.1\nHost: x\n\n"), 400, "bare LF");
        assert_eq!(status_of(b"GET /a HTTP/1.1\r\nHost : x\r\n\r\n"), 400);
        assert_eq!(
            status_of(b"GET /a HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n"),
            400
        );
        assert_eq!(
            status_of(b"GET /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"),
            400
        );
        let huge = format!(
            "GET /a HTTP/1.1\r\nHost: x\r\nX: {}\r\n\r\n",
            "y".repeat(20_000)
        );
        assert_eq!(status_of(huge.as_bytes()), 431);
    }

    #[test]
    fn query_values_are_percent_decoded() {
        let pairs = parse_query("fieldSelector=metadata.name%3Dn1&watch&x=a+b").expect("decodes");
        assert_eq!(
            pairs,
            [
                ("fieldSelector".to_string(), "metadata.name=n1".to_string()),
                ("watch".to_string(), String::new()),
                ("x".to_string(), "a b".to_string()),
            ]
        );
        assert_eq!(parse_query("a=%zz"), None);
    }
}
