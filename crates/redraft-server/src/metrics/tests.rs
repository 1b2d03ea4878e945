//! Tests of the counters as `/metrics` shows them.

#![allow(clippy::unwrap_used)]

use super::*;

fn lines(m: &Metrics) -> Vec<String> {
    m.render(0).lines().map(str::to_owned).collect()
}

fn has(m: &Metrics, line: &str) -> bool {
    lines(m).iter().any(|l| l == line)
}

#[test]
fn the_queue_gauges_and_counters_show_what_they_were_set_to() {
    let m = Metrics::default();
    for line in [
        "redraft_queue_depth 0",
        "redraft_runs_waiting 0",
        "redraft_lease_takeovers_total 0",
        "redraft_runs_shed_total{reason=\"queue_full\"} 0",
        "redraft_runs_shed_total{reason=\"overloaded\"} 0",
        "redraft_runs_shed_total{reason=\"shutting_down\"} 0",
    ] {
        assert!(has(&m, line), "missing `{line}` before anything happened");
    }
    m.set_queue_depth(7);
    m.set_queue_depth(5);
    m.set_runs_waiting(2);
    m.run_shed(ShedReason::QueueFull);
    m.run_shed(ShedReason::QueueFull);
    m.run_shed(ShedReason::ShuttingDown);
    m.lease_takeover();
    m.transport_retry("openai/gpt-4o-mini");
    m.transport_retry("openai/gpt-4o-mini");
    for line in [
        "redraft_queue_depth 5",
        "redraft_runs_waiting 2",
        "redraft_lease_takeovers_total 1",
        "redraft_runs_shed_total{reason=\"queue_full\"} 2",
        "redraft_runs_shed_total{reason=\"overloaded\"} 0",
        "redraft_runs_shed_total{reason=\"shutting_down\"} 1",
        "redraft_transport_retries_total{model=\"openai/gpt-4o-mini\"} 2",
        "# TYPE redraft_queue_depth gauge",
        "# TYPE redraft_runs_shed_total counter",
        "# HELP redraft_lease_takeovers_total Runs this process took over after their lease expired.",
    ] {
        assert!(has(&m, line), "missing `{line}` in\n{}", m.render(0));
    }
}

#[test]
fn every_family_has_help_and_type_before_its_samples() {
    let m = Metrics::default();
    m.http_request(Some("/v1/runs/{id}"), &Method::GET, 200, Duration::from_millis(3));
    m.transport_retry("a/b");
    let text = m.render(1);
    let mut declared = BTreeSet::new();
    let mut help = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help.insert(rest.split(' ').next().unwrap().to_owned());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let name = rest.split(' ').next().unwrap().to_owned();
            assert!(help.contains(&name), "`{name}` has a TYPE but no HELP");
            declared.insert(name);
        } else {
            let name = line.split(['{', ' ']).next().unwrap();
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s).filter(|f| declared.contains(*f)))
                .unwrap_or(name);
            assert!(declared.contains(family), "`{line}` comes before its family's TYPE");
        }
    }
}

#[test]
fn the_http_histogram_is_cumulative_and_counts_every_request() {
    let m = Metrics::default();
    m.http_request(Some("/healthz"), &Method::GET, 200, Duration::from_millis(3));
    m.http_request(Some("/healthz"), &Method::GET, 200, Duration::from_millis(70));
    m.http_request(None, &Method::from_bytes(b"BREW").unwrap(), 404, Duration::from_secs(1000));
    for line in [
        "redraft_http_requests_total{route=\"/healthz\",method=\"GET\",status=\"200\"} 2",
        "redraft_http_requests_total{route=\"unmatched\",method=\"other\",status=\"404\"} 1",
        "redraft_http_request_duration_seconds_bucket{route=\"/healthz\",method=\"GET\",le=\"0.005\"} 1",
        "redraft_http_request_duration_seconds_bucket{route=\"/healthz\",method=\"GET\",le=\"0.05\"} 1",
        "redraft_http_request_duration_seconds_bucket{route=\"/healthz\",method=\"GET\",le=\"0.1\"} 2",
        "redraft_http_request_duration_seconds_bucket{route=\"/healthz\",method=\"GET\",le=\"+Inf\"} 2",
        "redraft_http_request_duration_seconds_count{route=\"/healthz\",method=\"GET\"} 2",
        "redraft_http_request_duration_seconds_bucket{route=\"unmatched\",method=\"other\",le=\"300\"} 0",
        "redraft_http_request_duration_seconds_bucket{route=\"unmatched\",method=\"other\",le=\"+Inf\"} 1",
    ] {
        assert!(has(&m, line), "missing `{line}` in\n{}", m.render(0));
    }
}

#[test]
fn model_labels_are_escaped_and_bounded() {
    let m = Metrics::default();
    m.transport_retry("odd/\"quoted\"\\name\n");
    assert!(has(&m, r#"redraft_transport_retries_total{model="odd/\"quoted\"\\name\n"} 1"#), "{}", m.render(0));
    for i in 0..MAX_MODELS + 5 {
        m.transport_retry(&format!("p/m{i}"));
    }
    let retries = lines(&m).into_iter().filter(|l| l.starts_with("redraft_transport_retries_total{")).count();
    assert_eq!(retries, MAX_MODELS + 1, "{MAX_MODELS} models and `other`");
    assert!(has(&m, "redraft_transport_retries_total{model=\"other\"} 6"), "{}", m.render(0));
}
