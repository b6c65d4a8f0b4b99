//! The prompts of vLLM's two code-editing `hf` sets, zeta (next-edit
//! prediction) and Blazedit (apply a change request to a file): the
//! instruction text vLLM wraps around each row's fields, and where zeta's
//! expected output starts. Pure.

/// vLLM's next-edit prompt for zeta, around the row's `events` and `input`.
const ZETA_PROMPT: [&str; 3] = [
    "### Instruction:\nYou are a code completion assistant and your task is to analyze user edits and then rewrite an excerpt that the user provides, suggesting the appropriate edits within the excerpt, taking into account the cursor location.\n\n### User Edits:\n\n",
    "\n\n### User Excerpt:\n\n",
    "\n\n### Response:\n\n",
];

/// Where zeta's expected output starts in its `output`.
const ZETA_MARKER: &str = "<|editable_region_start|>";

/// Zeta's prompt: the instruction around `events` and `input`.
pub fn zeta_prompt(events: &str, input: &str) -> String {
    let [head, mid, tail] = ZETA_PROMPT;
    format!("{head}{events}{mid}{input}{tail}")
}

/// Zeta's expected output: `output` from the editable-region marker on.
/// Python's `find()` is -1 when the marker is missing, so vLLM then keeps
/// the last character: so does this.
pub fn zeta_expected(output: &str) -> &str {
    let from = output
        .find(ZETA_MARKER)
        .unwrap_or_else(|| output.char_indices().last().map_or(0, |(i, _)| i));
    &output[from..]
}

/// vLLM's (Blazedit's own) edit prompt, around `code` and `change_request`.
const BLAZEDIT_PROMPT: [&str; 3] = [
    "Given a code file, please apply the change requests and generate the new file.\n\nOriginal file:\n```python\n",
    "\n```\n\nChange request:\n",
    "\n\nPlease generate the new code file in the \"New file\" section below.",
];

/// Blazedit's prompt: the edit instruction around `code` and
/// `change_request`.
pub fn blazedit_prompt(code: &str, change_request: &str) -> String {
    let [head, mid, tail] = BLAZEDIT_PROMPT;
    format!("{head}{code}{mid}{change_request}{tail}")
}
