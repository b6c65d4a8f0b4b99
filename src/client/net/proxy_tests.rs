use super::*;
use std::collections::HashMap;

fn env(vars: &[(&str, &str)]) -> ProxyEnv {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    ProxyEnv::from_lookup(|k| map.get(k).cloned())
}

/// The proxy chosen for a target (the variable must be usable).
fn pick(e: &ProxyEnv, https: bool, host: &str, port: u16) -> Option<ProxyUrl> {
    e.proxy_for(https, host, port).unwrap().cloned()
}

fn np(value: &str, host: &str, port: u16) -> bool {
    bypass(&parse_no_proxy(value), host, port)
}

#[test]
fn scheme_picks_the_variable_and_lowercase_wins() {
    let e = env(&[
        ("HTTPS_PROXY", "http://upper:1"),
        ("https_proxy", "http://lower:2"),
        ("HTTP_PROXY", "plain:3128"),
    ]);
    let https = pick(&e, true, "api.example.com", 443).unwrap();
    assert_eq!(
        (https.host.as_str(), https.port, https.var),
        ("lower", 2, "https_proxy")
    );
    let http = pick(&e, false, "api.example.com", 80).unwrap();
    assert_eq!(
        (http.host.as_str(), http.port, http.var),
        ("plain", 3128, "HTTP_PROXY")
    );
    // Only HTTP_PROXY set: an https target goes direct (curl, aiohttp).
    let e = env(&[("HTTP_PROXY", "http://p:8080")]);
    assert_eq!(pick(&e, true, "h", 443), None);
    // Empty values count as unset.
    let e = env(&[("https_proxy", " "), ("HTTPS_PROXY", "http://p:9")]);
    assert_eq!(pick(&e, true, "h", 443).unwrap().host, "p");
}

#[test]
fn proxy_urls_parse_with_auth_default_port_and_ipv6() {
    let e = env(&[
        ("https_proxy", "http://user:p%40ss@proxy.corp:3128/"),
        ("http_proxy", "http://[::1]"),
    ]);
    let p = pick(&e, true, "x", 443).unwrap();
    assert_eq!(p.userinfo.as_deref(), Some("user:p%40ss"));
    assert_eq!((p.host.as_str(), p.port), ("proxy.corp", 3128));
    let p = pick(&e, false, "x", 80).unwrap();
    assert_eq!((p.host.as_str(), p.port), ("::1", 80));
}

#[test]
fn unusable_proxy_urls_fail_only_when_used_and_name_the_variable() {
    let e = env(&[
        ("HTTPS_PROXY", "socks5://p:1080"),
        ("http_proxy", "http://p:99999"),
    ]);
    let err = e.proxy_for(true, "h", 443).unwrap_err();
    assert!(
        err.starts_with("HTTPS_PROXY=socks5://p:1080: socks5 proxies"),
        "{err}"
    );
    let err = e.proxy_for(false, "h", 80).unwrap_err();
    assert!(err.contains("'99999' is not a port number"), "{err}");
    let e = env(&[("http_proxy", "http://:8080"), ("no_proxy", "skip.me")]);
    assert!(e
        .proxy_for(false, "h", 80)
        .unwrap_err()
        .contains("has no host"));
    // A host NO_PROXY exempts never looks at the broken variable.
    assert_eq!(pick(&e, false, "skip.me", 80), None);
    // Nothing set: direct.
    assert_eq!(pick(&env(&[]), true, "h", 443), None);
}

#[test]
fn no_proxy_domains_match_themselves_and_subdomains_only() {
    assert!(np("example.com", "example.com", 443));
    assert!(np("example.com", "api.example.com", 443));
    assert!(np(".example.com", "example.com", 443));
    assert!(np("EXAMPLE.com", "Api.Example.COM.", 443));
    assert!(!np("example.com", "badexample.com", 443));
    assert!(!np("api.example.com", "example.com", 443));
    assert!(np("a.org, b.org  c.org", "x.c.org", 80));
    assert!(!np("", "x", 80));
}

#[test]
fn no_proxy_star_ips_cidr_and_ports() {
    assert!(np("*", "anything", 1));
    assert!(np("10.1.2.3", "10.1.2.3", 80));
    assert!(!np("10.1.2.3", "10.1.2.4", 80));
    assert!(np("10.0.0.0/8", "10.200.0.1", 80));
    assert!(!np("10.0.0.0/8", "11.0.0.1", 80));
    assert!(np("0.0.0.0/0", "8.8.8.8", 80));
    assert!(np("::1", "[::1]", 80));
    assert!(np("fd00::/8", "fd12::5", 80));
    assert!(!np("fd00::/8", "10.0.0.1", 80));
    assert!(np("host:8443", "host", 8443));
    assert!(!np("host:8443", "host", 443));
    assert!(np("[::1]:9", "::1", 9));
    // A domain entry never matches an IP target.
    assert!(!np("localhost", "127.0.0.1", 80));
}

#[test]
fn loopback_is_proxied_unless_no_proxy_says_so() {
    let e = env(&[("http_proxy", "http://p:1")]);
    assert!(pick(&e, false, "127.0.0.1", 8000).is_some());
    assert!(pick(&e, false, "localhost", 8000).is_some());
    let e = env(&[
        ("http_proxy", "http://p:1"),
        ("NO_PROXY", "127.0.0.1,localhost"),
    ]);
    assert_eq!(pick(&e, false, "127.0.0.1", 8000), None);
    assert_eq!(pick(&e, false, "localhost", 8000), None);
    assert!(pick(&e, false, "10.0.0.1", 8000).is_some());
    // Lowercase no_proxy wins over uppercase.
    let e = env(&[
        ("http_proxy", "http://p:1"),
        ("no_proxy", "a"),
        ("NO_PROXY", "*"),
    ]);
    assert!(pick(&e, false, "b", 80).is_some());
}
