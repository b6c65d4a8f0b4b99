//! The `images` of custom JSONL rows: each entry an `http(s)://` URL or a
//! `data:image/...;base64,` URL (sent as is), or a path (`file://` allowed;
//! relative to the JSONL file's folder) read at load time and sent as a
//! base64 data URL whose MIME type comes from the file extension (jpg/jpeg,
//! png, gif, webp, bmp). kneecap sends data rather than vLLM's `file://`
//! URLs, so the server needs no access to the client's files.
//!
//! Pure: the file reader is passed in ([`super::dataset::load`] passes
//! `std::fs::read`). Every error names the file, the line and the entry.

use std::path::{Path, PathBuf};

use anyhow::bail;
use base64::Engine;

use super::custom::CustomRow;

/// Replace every row's image entries by the URLs to send; `dataset` is the
/// JSONL file (relative paths are resolved against its folder).
pub fn resolve(
    origin: &str,
    dataset: &Path,
    rows: &mut [CustomRow],
    read: impl Fn(&Path) -> std::io::Result<Vec<u8>>,
) -> anyhow::Result<()> {
    let dir = dataset.parent().unwrap_or(Path::new(""));
    for row in rows.iter_mut() {
        for (k, entry) in row.images.iter_mut().enumerate() {
            let at = format!("{origin}:{}: \"images\"[{k}]", row.line);
            *entry = url_for(&at, entry, dir, &read)?;
        }
    }
    Ok(())
}

/// The URL to send for one entry.
fn url_for(
    at: &str,
    entry: &str,
    dir: &Path,
    read: &impl Fn(&Path) -> std::io::Result<Vec<u8>>,
) -> anyhow::Result<String> {
    let lower = entry.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        return Ok(entry.to_owned());
    }
    if lower.starts_with("data:") {
        if !(lower.starts_with("data:image/") && lower.contains(";base64,")) {
            bail!("{at}: a data URL must look like data:image/png;base64,...");
        }
        return Ok(entry.to_owned());
    }
    let path = PathBuf::from(entry.strip_prefix("file://").unwrap_or(entry));
    let path = if path.is_relative() {
        dir.join(path)
    } else {
        path
    };
    let Some(mime) = mime_of(&path) else {
        bail!(
            "{at}: '{entry}' is not an image path (.jpg, .jpeg, .png, .gif, .webp, .bmp), an http(s) URL or a data URL"
        );
    };
    let bytes =
        read(&path).map_err(|e| anyhow::anyhow!("{at}: cannot read '{}': {e}", path.display()))?;
    let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
    Ok(format!("data:{mime};base64,{b64}"))
}

/// The MIME type of an image file, by its extension.
fn mime_of(path: &Path) -> Option<&'static str> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    Some(match ext.as_str() {
        "jpg" | "jpeg" => "image/jpeg",
        "png" => "image/png",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "bmp" => "image/bmp",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(images: &[&str]) -> CustomRow {
        CustomRow {
            line: 7,
            prompt: "describe".into(),
            output_tokens: None,
            images: images.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn fake_read(p: &Path) -> std::io::Result<Vec<u8>> {
        if p == Path::new("/data/imgs/cat.png") {
            Ok(vec![1, 2, 3])
        } else {
            Err(std::io::Error::from(std::io::ErrorKind::NotFound))
        }
    }

    #[test]
    fn paths_become_data_urls_and_urls_pass_through() {
        let mut rows = [row(&[
            "imgs/cat.png",
            "https://example.com/a.jpg",
            "data:image/jpeg;base64,AAAA",
        ])];
        resolve("d.jsonl", Path::new("/data/d.jsonl"), &mut rows, fake_read).unwrap();
        assert_eq!(rows[0].images[0], "data:image/png;base64,AQID");
        assert_eq!(rows[0].images[1], "https://example.com/a.jpg");
        assert_eq!(rows[0].images[2], "data:image/jpeg;base64,AAAA");
    }

    #[test]
    fn a_bad_entry_names_file_line_and_entry() {
        for (entry, why) in [
            ("imgs/dog.png", "cannot read"),
            ("notes.txt", "not an image path"),
            ("data:text/plain,hi", "data URL"),
        ] {
            let mut rows = [row(&["imgs/cat.png", entry])];
            let msg = resolve("d.jsonl", Path::new("/data/d.jsonl"), &mut rows, fake_read)
                .unwrap_err()
                .to_string();
            assert!(msg.starts_with("d.jsonl:7: \"images\"[1]"), "{msg}");
            assert!(msg.contains(why) && !msg.contains('\n'), "{msg}");
        }
    }
}
