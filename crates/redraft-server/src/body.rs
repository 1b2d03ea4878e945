//! JSON request bodies: read within the size limit and parsed with a message that names the
//! problem (400), never axum's default 422 for a body that does not fit the shape.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::error::{ApiError, Flavor};
use crate::state::AppState;

/// A JSON body of type `T`.
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state).await.map_err(|r| read_error(&r, state, Flavor::Redraft))?;
        parse(&bytes).map(JsonBody)
    }
}

/// Why a body could not be read: too large (413) or broken.
pub fn read_error(rejection: &BytesRejection, state: &AppState, flavor: Flavor) -> ApiError {
    let e = if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::too_large(state.config().server.max_body_bytes)
    } else {
        ApiError::bad_request("malformed_request", format!("cannot read the request body: {}", rejection.body_text()))
    };
    if flavor == Flavor::OpenAi { e.openai() } else { e }
}

/// Parse a JSON body, naming what is wrong.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("malformed_request", "the request body is empty; send a JSON object"));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let e = e.into_inner();
        match e.classify() {
            // The field it is about, unless the whole body is.
            serde_json::error::Category::Data if path == "." => {
                ApiError::bad_request("invalid_request", format!("the request is invalid: {e}"))
            }
            serde_json::error::Category::Data => {
                ApiError::bad_request("invalid_request", format!("the request is invalid: `{path}`: {e}"))
            }
            _ => ApiError::bad_request("malformed_request", format!("the request body is not valid JSON: {e}")),
        }
    })?;
    de.end()
        .map_err(|e| ApiError::bad_request("malformed_request", format!("the request body is not valid JSON: {e}")))?;
    Ok(value)
}
