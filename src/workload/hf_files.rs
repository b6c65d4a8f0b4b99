//! Which files of a local `hf` dataset directory make the split, by the
//! rule Hugging Face `datasets` uses for a folder of data files: a file
//! whose name carries a split word (`train`, `test`, `validation`, ...)
//! belongs to that split; when no name carries one, every file is `train`.
//! Only JSON and JSONL are read; Parquet and Arrow files are refused with
//! the way to convert them. Pure: names in, names out.

use anyhow::bail;

/// Words that name a split in a file name (Hugging Face's list, shortened).
const SPLIT_WORDS: [&str; 7] = ["train", "test", "validation", "valid", "val", "dev", "eval"];

/// The split a file name is for, if it names one.
fn split_of(name: &str) -> Option<&'static str> {
    let file = name.rsplit('/').next().unwrap_or(name).to_ascii_lowercase();
    let words: Vec<&str> = file.split(|c: char| !c.is_ascii_alphanumeric()).collect();
    SPLIT_WORDS.into_iter().find(|w| words.contains(w))
}

/// Whether `name` is a JSON or JSONL data file.
pub fn is_json(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.ends_with(".json") || lower.ends_with(".jsonl")
}

/// Whether `name` is a columnar file kneecap does not read.
pub fn is_columnar(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.ends_with(".parquet") || lower.ends_with(".arrow")
}

/// The one-line refusal of a Parquet or Arrow file.
pub fn columnar_refusal(file: &str) -> String {
    format!(
        "'{file}' is Parquet/Arrow, which kneecap does not read; convert it to JSONL (e.g. python -c \
         \"import pandas; pandas.read_parquet('{file}').to_json('data.jsonl', orient='records', lines=True)\") \
         and pass that file or its folder as --dataset-path"
    )
}

/// The files of `dir` (paths relative to it, sorted) that hold `split`.
pub fn pick(dir: &str, names: &[String], split: &str) -> anyhow::Result<Vec<String>> {
    let json: Vec<&String> = names.iter().filter(|n| is_json(n)).collect();
    if json.is_empty() {
        if let Some(col) = names.iter().find(|n| is_columnar(n)) {
            bail!("{}", columnar_refusal(&format!("{dir}/{col}")));
        }
        bail!("--dataset-path '{dir}' holds no .json or .jsonl file; point it at the dataset's JSON/JSONL files");
    }
    let named = json.iter().any(|n| split_of(n).is_some());
    let mut picked: Vec<String> = json
        .into_iter()
        .filter(|n| {
            if named {
                split_of(n) == Some(split)
            } else {
                split == "train"
            }
        })
        .cloned()
        .collect();
    if picked.is_empty() {
        bail!(
            "--dataset-path '{dir}': no JSON/JSONL file is for split '{split}' (a file's name carries its split, \
             e.g. {split}.jsonl; with no split in any name every file is 'train'); pass --hf-split or rename"
        );
    }
    picked.sort();
    Ok(picked)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn split_words_in_names_choose_the_files() {
        let n = names(&[
            "data/train-00000.jsonl",
            "data/test-00000.jsonl",
            "README.md",
        ]);
        assert_eq!(pick("d", &n, "train").unwrap(), ["data/train-00000.jsonl"]);
        assert_eq!(pick("d", &n, "test").unwrap(), ["data/test-00000.jsonl"]);
        let err = pick("d", &n, "validation").unwrap_err().to_string();
        assert!(err.contains("'validation'") && err.contains("'d'"), "{err}");
    }

    #[test]
    fn without_split_words_every_file_is_train() {
        let n = names(&["question.jsonl", "more.json"]);
        assert_eq!(
            pick("d", &n, "train").unwrap(),
            ["more.json", "question.jsonl"]
        );
        assert!(pick("d", &n, "test").is_err());
    }

    #[test]
    fn a_folder_of_parquet_is_refused_with_the_conversion() {
        let n = names(&["data/train-00000-of-00001.parquet"]);
        let err = pick("ds", &n, "train").unwrap_err().to_string();
        assert!(
            err.contains("ds/data/train-00000-of-00001.parquet"),
            "{err}"
        );
        assert!(
            err.contains("JSONL") && err.contains("read_parquet"),
            "{err}"
        );
        assert!(pick("ds", &names(&["notes.txt"]), "train").is_err());
    }

    #[test]
    fn a_word_inside_another_is_not_a_split() {
        // "contest" holds "test" but is not the word test.
        assert_eq!(split_of("contest.jsonl"), None);
        assert_eq!(split_of("x/validation.json"), Some("validation"));
    }
}
