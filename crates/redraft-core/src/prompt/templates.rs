//! The template sources: the built-in first, feedback and fresh templates (minijinja, the
//! text the proposer reads) and the overrides a plan may carry in their place.

use serde::{Deserialize, Serialize};

/// Template sources; `None` uses the built-in template.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Templates {
    /// The first user message.
    pub first: Option<String>,
    /// The feedback user message (conversation strategy).
    pub feedback: Option<String>,
    /// The whole prompt (fresh strategy).
    pub fresh: Option<String>,
}

pub const FIRST_TEMPLATE: &str = r#"{{ prompt }}
{% if context %}

Context:
{{ context_text }}
{% endif %}
{% if structured %}
{% if schema %}

Answer with JSON that matches this JSON Schema:
```json
{{ schema }}
```
{% endif %}
{% if example %}

{% if schema %}An example of the expected shape (replace every placeholder with a real value):{% else %}Answer with JSON of this shape (replace every placeholder with a real value):{% endif %}

```json
{{ example }}
```
{% endif %}

Answer with only the JSON value, no explanation.
{% endif %}"#;

pub const FEEDBACK_TEMPLATE: &str = r#"Attempt {{ attempt }} of {{ max_attempts }}.

{% if repeat_of %}
Your answer is identical to attempt {{ repeat_of }} and was rejected for the same reasons. Do not repeat it: change what the problems below point at.

{% endif %}
Your previous answer (attempt {{ previous }}) was rejected:
{{ fence }}
{{ echo }}
{{ fence }}
{% if echo_truncated %}
[truncated: showing the first {{ echo_shown }} of {{ echo_chars }} characters]
{% endif %}
{% if cut_off %}
It was cut off at the output token limit before it ended.
{% endif %}

Problems ({{ issues | length }}):
{% for issue in issues %}
{{ loop.index }}. {{ issue.path or "(root)" }}: {{ issue.message }} [{{ issue.code }}]
{% if issue.hint is defined and issue.hint %}
   Hint: {{ issue.hint }}
{% endif %}
{% endfor %}
{% if issues_omitted %}
[{{ issues_omitted }} more problems not shown]
{% endif %}
{% if schema %}

The answer must match this JSON Schema:
```json
{{ schema }}
```
{% endif %}
{% if example %}

The answer must have this shape (replace every placeholder with a real value):
```json
{{ example }}
```
{% endif %}

{% if structured %}Return only the corrected JSON value, with no explanation.{% else %}Return only the corrected answer, with no explanation.{% endif %}{% if cut_off %} Keep it short: nothing repeated.{% endif %}"#;

pub const FRESH_TEMPLATE: &str = r#"{{ first }}
{% if prior %}

Prior attempts:
{% for p in prior %}

Attempt {{ p.iteration }}{% if p.repeat_of %} (identical to attempt {{ p.repeat_of }}){% endif %} was rejected:
{{ p.fence }}
{{ p.echo }}
{{ p.fence }}
{% if p.echo_truncated %}
[truncated: showing the first {{ p.echo_shown }} of {{ p.echo_chars }} characters]
{% endif %}
Problems ({{ p.issues | length }}):
{% for issue in p.issues %}
{{ loop.index }}. {{ issue.path or "(root)" }}: {{ issue.message }} [{{ issue.code }}]
{% if issue.hint is defined and issue.hint %}
   Hint: {{ issue.hint }}
{% endif %}
{% endfor %}
{% if p.issues_omitted %}
[{{ p.issues_omitted }} more problems not shown]
{% endif %}
{% endfor %}

This is attempt {{ attempt }} of {{ max_attempts }}. Fix every problem above. {% if structured %}Return only the corrected JSON value, with no explanation.{% else %}Return only the corrected answer, with no explanation.{% endif %}

{% endif %}"#;
