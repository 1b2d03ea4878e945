//! Which `Host`s are served: loopback names without tokens, any with tokens, and the names
//! `[server] allowed_hosts` adds; a name an attacker can point at 127.0.0.1 reads nothing.

use redraft_testkit::reply;

use super::{HOST, iterate, message, req, stored_runs};
use crate::{harness, harness_with};

/// `Host` values a browser sends for loopback: served without tokens.
const LOOPBACK_HOSTS: &[&str] = &[
    "localhost",
    "localhost:8080",
    "localhost:80",
    "LOCALHOST:8080",
    "LocalHost",
    "127.0.0.1",
    "127.0.0.1:8080",
    "127.0.0.1:80",
    "127.0.0.2:8080",
    "127.255.255.254:1",
    "[::1]",
    "[::1]:8080",
];

/// `Host` values that are not loopback as a browser writes it: names an attacker can point at
/// 127.0.0.1 (DNS rebinding), look-alikes, smuggled user info and fragments, numeric spellings
/// no browser sends, other addresses, broken ports.
const HOSTILE_HOSTS: &[&str] = &[
    "attacker.example",
    "attacker.example:8080",
    "localhost.attacker.example",
    "localhost.attacker.example:8080",
    "127.0.0.1.nip.io",
    "127.0.0.1.nip.io:8080",
    "127.0.0.1.attacker.example:8080",
    "attacker.localhost:8080",
    "localhost.:8080",
    "localhost.",
    "localhostx:8080",
    "xlocalhost:8080",
    "127.0.0.1@evil",
    "127.0.0.1:8080@attacker.example",
    "localhost:8080@attacker.example:8080",
    "evil#127.0.0.1",
    "attacker.example#localhost:8080",
    "attacker.example/127.0.0.1",
    "attacker.example?127.0.0.1",
    "attacker.example\\127.0.0.1",
    "127.0.0.1,attacker.example",
    "127.0.0.1 attacker.example",
    "%6cocalhost:8080",
    "127.0.0.%31",
    "127.1",
    "127.1:8080",
    "2130706433",
    "2130706433:8080",
    "0x7f000001",
    "0x7f.0.0.1",
    "0177.0.0.1",
    "017700000001",
    "127.000.000.001",
    "0.0.0.0",
    "0.0.0.0:8080",
    "0",
    "[::]",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]:8080",
    "[0:0:0:0:0:0:0:1]:8080",
    "[::1%25lo]:8080",
    "::1",
    "[::1",
    "[::1]x",
    "192.168.1.20:8080",
    "10.0.0.1",
    "169.254.169.254",
    "127.0.0.1:8080:8080",
    "127.0.0.1:99999",
    "localhost:080",
    "localhost:",
    ":8080",
    "",
];

#[tokio::test]
async fn without_tokens_only_loopback_hosts_are_served_and_a_rebound_name_reads_nothing() {
    let h = harness(vec![reply(r#"{"city": "Toledo"}"#)]).await;
    let made = h.send(iterate(&[])).await;
    assert_eq!(made.status, 200, "{}", made.text);
    let run_id = made.json["run_id"].as_str().unwrap().to_owned();
    for host in LOOPBACK_HOSTS {
        let a = h.send(req("GET", &format!("/v1/runs/{run_id}"), &[("host", host)], "")).await;
        assert_eq!(a.status, 200, "{host}: {}", a.text);
    }
    assert!(HOSTILE_HOSTS.len() >= 50, "{}", HOSTILE_HOSTS.len());
    for host in HOSTILE_HOSTS {
        // A page at http://attacker.example:8080 whose name now resolves to 127.0.0.1 is, to the
        // browser, asking its own origin: it sends its own name.
        for uri in ["/v1/runs".to_owned(), format!("/v1/runs/{run_id}"), format!("/v1/runs/{run_id}/events")] {
            let a = h.send(req("GET", &uri, &[("host", host), ("sec-fetch-site", "same-origin")], "")).await;
            assert_eq!((a.status, a.json["error"]["code"].as_str()), (421, Some("host_not_allowed")), "{host} {uri}");
            assert!(!a.text.contains(&run_id), "{host}: {}", a.text);
            assert!(message(&a).contains("`[server] allowed_hosts`"), "{}", message(&a));
        }
        let a = h.send(iterate(&[("host", host)])).await;
        assert_eq!(a.status, 421, "{host}: {}", a.text);
    }
    assert_eq!(h.model.calls().await, 1, "only the local request called the model");
    assert_eq!(stored_runs(&h).await.len(), 1, "only the local request stored a run");
}

#[tokio::test]
async fn the_refusal_names_the_host_and_the_fix() {
    let h = harness(vec![]).await;
    let a = h.send(req("GET", "/v1/runs", &[("host", "attacker.example:8080")], "")).await;
    insta::assert_snapshot!(message(&a), @r"
    this server does not answer to the host `attacker.example:8080`: it serves loopback names (`localhost`, `127.0.0.1`, `[::1]`) and the names in `[server] allowed_hosts`
    hint: if that is a name of this server, add it without the port to `[server] allowed_hosts` in redraft.toml
    ");
    // The proxy's clients get OpenAI's shape.
    let a = h.send(req("GET", "/v1/models", &[("host", "attacker.example")], "")).await;
    assert_eq!((a.status, a.json["error"]["type"].as_str()), (421, Some("invalid_request_error")), "{}", a.text);
}

#[tokio::test]
async fn allowed_hosts_adds_exactly_the_names_it_lists() {
    let h =
        harness_with(vec![], vec![], |c| c.server.allowed_hosts = vec!["redraft.lan".into(), "192.168.1.20".into()])
            .await;
    for host in ["redraft.lan", "redraft.lan:8080", "REDRAFT.LAN:80", "192.168.1.20:8080", "localhost:8080"] {
        assert_eq!(h.send(req("GET", "/v1/runs", &[("host", host)], "")).await.status, 200, "{host}");
    }
    for host in [
        "x.redraft.lan",
        "redraft.lan.attacker.example",
        "redraft.lan.",
        "redraft.la",
        "redraft.lan@attacker.example",
        "192.168.1.2",
        "192.168.1.200",
        "attacker.example",
    ] {
        assert_eq!(h.send(req("GET", "/v1/runs", &[("host", host)], "")).await.status, 421, "{host}");
    }
}

#[tokio::test]
async fn with_tokens_any_host_is_served_unless_allowed_hosts_lists_some() {
    let token = [("authorization", "Bearer t1")];
    let h = harness_with(vec![], vec!["t1".into()], |_| {}).await;
    let a = h.send(req("GET", "/v1/runs", &[("host", "attacker.example"), token[0]], "")).await;
    assert_eq!(a.status, 200, "the token is the guard: {}", a.text);
    let a = h.send(req("GET", "/v1/runs", &[("host", "attacker.example")], "")).await;
    assert_eq!(a.status, 401, "{}", a.text);

    let h = harness_with(vec![], vec!["t1".into()], |c| c.server.allowed_hosts = vec!["redraft.lan".into()]).await;
    for (host, status) in [("attacker.example", 421), ("redraft.lan:8080", 200), ("127.0.0.1:8080", 200)] {
        let a = h.send(req("GET", "/v1/runs", &[("host", host), token[0]], "")).await;
        assert_eq!(a.status, status, "{host}: {}", a.text);
    }
}

#[tokio::test]
async fn the_request_target_and_every_host_header_must_name_this_server() {
    let h = harness(vec![]).await;
    // An absolute request target names the host the request is for (it overrides `Host`).
    let a = h.send(req("GET", "http://attacker.example/v1/runs", &[("host", HOST)], "")).await;
    assert_eq!(a.status, 421, "{}", a.text);
    let a = h.send(req("GET", "http://127.0.0.1:8080/v1/runs", &[("host", "attacker.example")], "")).await;
    assert_eq!(a.status, 421, "{}", a.text);
    let a = h.send(req("GET", "http://127.0.0.1:8080/v1/runs", &[("host", HOST)], "")).await;
    assert_eq!(a.status, 200, "{}", a.text);
    let a = h.send(req("GET", "/v1/runs", &[("host", HOST), ("host", "attacker.example")], "")).await;
    assert_eq!((a.status, a.json["error"]["code"].as_str()), (400, Some("malformed_request")), "{}", a.text);
    // No `Host` at all (HTTP/1.0, or a caller in this process): no browser sends that.
    let a = h.send(req("GET", "/v1/runs", &[], "")).await;
    assert_eq!(a.status, 200, "{}", a.text);
}
