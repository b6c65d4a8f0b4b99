//! Which proxy a target goes through, read from the environment the way curl
//! and aiohttp read it: `https_proxy`/`HTTPS_PROXY` for https targets,
//! `http_proxy`/`HTTP_PROXY` for http ones (lowercase first), and
//! `no_proxy`/`NO_PROXY` for exceptions. Pure: the variables come in through
//! a lookup function, so tests never touch the process environment.

use std::net::IpAddr;

/// A proxy address from `HTTPS_PROXY`/`HTTP_PROXY`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyUrl {
    /// Host name or IP (IPv6 without brackets).
    pub host: String,
    pub port: u16,
    /// `user:password` from the URL (percent-encoding kept as written), sent
    /// as `Proxy-Authorization: Basic`.
    pub userinfo: Option<String>,
    /// The variable it came from, for error messages.
    pub var: &'static str,
}

/// The proxy settings of one process environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyEnv {
    /// `http_proxy`/`HTTP_PROXY`, parsed; an unusable value is an error
    /// only for a run that would use it.
    pub http: Option<Result<ProxyUrl, String>>,
    pub https: Option<Result<ProxyUrl, String>>,
    /// `NO_PROXY` entries, lowercased, leading dots removed.
    pub no_proxy: Vec<String>,
}

impl ProxyEnv {
    /// Read the variables through `get` (`std::env::var(..).ok()` in use).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> ProxyEnv {
        let first = |names: [&'static str; 2]| {
            names
                .into_iter()
                .find_map(|n| get(n).filter(|v| !v.trim().is_empty()).map(|v| (n, v)))
        };
        let parse = |found: Option<(&'static str, String)>| {
            found.map(|(var, value)| parse_proxy_url(var, value.trim()))
        };
        let no_proxy = first(["no_proxy", "NO_PROXY"])
            .map(|(_, v)| parse_no_proxy(&v))
            .unwrap_or_default();
        ProxyEnv {
            http: parse(first(["http_proxy", "HTTP_PROXY"])),
            https: parse(first(["https_proxy", "HTTPS_PROXY"])),
            no_proxy,
        }
    }

    /// The proxy for a target (`https` says which variable applies), or
    /// `None` to connect directly. Loopback is not exempt unless `NO_PROXY`
    /// says so, as in curl. An unusable proxy URL (another scheme, no host,
    /// bad port) is an error naming the variable.
    pub fn proxy_for(
        &self,
        https: bool,
        host: &str,
        port: u16,
    ) -> Result<Option<&ProxyUrl>, String> {
        let proxy = if https { &self.https } else { &self.http };
        match proxy {
            None => Ok(None),
            Some(_) if bypass(&self.no_proxy, host, port) => Ok(None),
            Some(Ok(p)) => Ok(Some(p)),
            Some(Err(e)) => Err(e.clone()),
        }
    }
}

/// Split a `NO_PROXY` value (commas or spaces) into normalized entries.
pub fn parse_no_proxy(value: &str) -> Vec<String> {
    value
        .split(|c: char| c == ',' || c.is_whitespace())
        .map(|e| e.trim().trim_start_matches('.').to_ascii_lowercase())
        .filter(|e| !e.is_empty())
        .collect()
}

/// Whether `NO_PROXY` entries exempt `host:port`. An entry is `*` (every
/// host), a domain (matches itself and its subdomains), an IP address, a
/// CIDR block (`10.0.0.0/8`), each optionally with `:port`.
pub fn bypass(entries: &[String], host: &str, port: u16) -> bool {
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase();
    let host_ip: Option<IpAddr> = host.parse().ok();
    entries.iter().any(|entry| {
        if entry == "*" {
            return true;
        }
        let (name, entry_port) = split_port(entry);
        if entry_port.is_some_and(|p| p != port) {
            return false;
        }
        let name = name.trim_end_matches('.');
        if let Some(ip) = host_ip {
            return ip_matches(name, ip);
        }
        host == name
            || (host.len() > name.len()
                && host.ends_with(name)
                && host.as_bytes()[host.len() - name.len() - 1] == b'.')
    })
}

/// `name:port`, `[v6]:port`, `[v6]` or a bare name / IPv6 address.
fn split_port(entry: &str) -> (&str, Option<u16>) {
    if let Some(rest) = entry.strip_prefix('[') {
        let Some((addr, after)) = rest.split_once(']') else {
            return (entry, None);
        };
        return (addr, after.strip_prefix(':').and_then(|p| p.parse().ok()));
    }
    match entry.rsplit_once(':') {
        // One colon: a port. More: a bare IPv6 address (or a v6 CIDR).
        Some((name, port)) if !name.contains(':') => (name, port.parse().ok()),
        _ => (entry, None),
    }
}

/// `entry` is an IP address equal to `ip`, or a CIDR block holding it.
fn ip_matches(entry: &str, ip: IpAddr) -> bool {
    let (addr, bits) = match entry.split_once('/') {
        Some((a, b)) => match b.parse::<u32>() {
            Ok(bits) => (a, Some(bits)),
            Err(_) => return false,
        },
        None => (entry, None),
    };
    let Ok(net) = addr.parse::<IpAddr>() else {
        return false;
    };
    let (net, ip, width) = match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(i)) => (u32::from(n) as u128, u32::from(i) as u128, 32),
        (IpAddr::V6(n), IpAddr::V6(i)) => (u128::from(n), u128::from(i), 128),
        _ => return false,
    };
    let bits = bits.unwrap_or(width);
    if bits > width {
        return false;
    }
    let shift = width - bits;
    // A shift of 128 would overflow: /0 matches everything of the family.
    shift == 128 || (net >> shift) == (ip >> shift)
}

/// `http://[user:pass@]host[:port][/]` (a missing scheme means http, as in
/// curl); the port defaults to 80 as in aiohttp (curl assumes 1080).
fn parse_proxy_url(var: &'static str, value: &str) -> Result<ProxyUrl, String> {
    let rest = match value.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
        Some((scheme, _)) => {
            return Err(format!(
                "{var}={value}: {scheme} proxies are not supported; use an http:// proxy (it tunnels https with CONNECT) or unset {var}"
            ))
        }
        None => value,
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let (userinfo, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u.to_string()), h),
        None => (None, authority),
    };
    let bad_port = |p: &str| format!("{var}={value}: '{p}' is not a port number");
    let (host, port_text) = match hostport.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((h, "")) => (h, None),
            Some((h, after)) => (h, Some(after.strip_prefix(':').unwrap_or(after))),
            None => return Err(format!("{var}={value}: unclosed '[' in the host")),
        },
        None => match hostport.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        },
    };
    let port = match port_text {
        Some(p) => p.parse::<u16>().map_err(|_| bad_port(p))?,
        None => 80,
    };
    if host.is_empty() {
        return Err(format!("{var}={value}: the proxy URL has no host"));
    }
    Ok(ProxyUrl {
        host: host.to_string(),
        port,
        userinfo,
        var,
    })
}

#[cfg(test)]
#[path = "proxy_tests.rs"]
mod tests;
