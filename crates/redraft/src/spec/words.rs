//! The JSON Schemas of a request's durations and closed sets of words, for the types the core defines
//! without a schema (`OnEscalation`, `PromptStyle`, `Strategy`). A test reads every word
//! listed back through serde, so a schema never admits a word the request refuses.

use schemars::{Schema, SchemaGenerator, json_schema};

/// The words `on_escalation` takes.
pub(super) const ON_ESCALATION: [&str; 2] = ["fail", "await"];
/// The words `prompt_style` takes.
pub(super) const PROMPT_STYLE: [&str; 3] = ["schema", "example", "both"];
/// The words `strategy` takes.
pub(super) const STRATEGY: [&str; 2] = ["conversation", "fresh"];

fn one_of(words: &[&str]) -> Schema {
    json_schema!({"type": ["string", "null"], "enum": words.iter().map(|w| Some(*w)).chain([None]).collect::<Vec<_>>()})
}

pub(super) fn on_escalation(_: &mut SchemaGenerator) -> Schema {
    one_of(&ON_ESCALATION)
}

pub(super) fn prompt_style(_: &mut SchemaGenerator) -> Schema {
    one_of(&PROMPT_STYLE)
}

/// A duration: `"90s"`, `"5m"`, `"1h30m"`, `"250ms"`, or a number of seconds.
pub(super) fn duration(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": ["string", "number", "null"]})
}

pub(super) fn strategy(_: &mut SchemaGenerator) -> Schema {
    one_of(&STRATEGY)
}

#[cfg(test)]
mod tests {
    use redraft_core::{OnEscalation, PromptStyle, Strategy};
    use serde::de::DeserializeOwned;

    use super::*;

    fn every_word_reads<T: DeserializeOwned + PartialEq + std::fmt::Debug>(words: &[&str], all: &[T]) {
        let read: Vec<T> = words.iter().map(|w| serde_json::from_value(serde_json::json!(w)).unwrap()).collect();
        assert_eq!(read.len(), all.len());
        for t in all {
            assert!(read.contains(t), "{t:?} has no word in the schema");
        }
    }

    #[test]
    fn the_schemas_list_exactly_the_words_serde_reads() {
        every_word_reads(&ON_ESCALATION, &[OnEscalation::Fail, OnEscalation::Await]);
        every_word_reads(&PROMPT_STYLE, &[PromptStyle::Schema, PromptStyle::Example, PromptStyle::Both]);
        every_word_reads(&STRATEGY, &[Strategy::Conversation, Strategy::Fresh]);
    }
}
