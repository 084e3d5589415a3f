//! Streamed answers (beyond the reference): server-sent events of both
//! wire shapes, read incrementally. Each piece of public assistant text
//! becomes one `agent_message_chunk` item for the method's optional
//! `events` port (the ACP public-updates channel contract), while the
//! final answer still settles as one value, judged exactly as a complete
//! answer is (see [`super::wire`] for the stop reasons).
//!
//! - Responses: `response.output_text.delta` events carry text; the
//!   terminal `response.completed` / `response.incomplete` /
//!   `response.failed` event carries the whole response.
//! - Chat Completions: `choices[0].delta.content` / `.refusal` carry text;
//!   `finish_reason` the stop reason; `data: [DONE]` ends the stream.
//!
//! A stream that ends before its terminal event proves no result
//! (`UNCERTAIN`).

use serde_json::{json, Value};

use super::values::Api;
use super::wire::{self, Answer, NoAnswer};

/// The longest single event the reader holds.
pub const MAX_EVENT_BYTES: usize = 1024 * 1024;

/// Reads one streamed answer.
#[derive(Debug)]
pub struct Stream {
    api: Api,
    buffer: Vec<u8>,
    text: String,
    refusal: String,
    finish: Option<String>,
    done: bool,
    terminal: Option<Value>,
    failed: bool,
}

impl Stream {
    pub fn new(api: Api) -> Stream {
        Stream {
            api,
            buffer: Vec::new(),
            text: String::new(),
            refusal: String::new(),
            finish: None,
            done: false,
            terminal: None,
            failed: false,
        }
    }

    /// Feed bytes; returns the text pieces they completed, in order.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<String>, NoAnswer> {
        self.buffer.extend_from_slice(bytes);
        let mut pieces = Vec::new();
        while let Some((end, skip)) = event_end(&self.buffer) {
            let block: Vec<u8> = self.buffer.drain(..end + skip).take(end).collect();
            if let Some(piece) = self.event(&block)? {
                pieces.push(piece);
            }
        }
        if self.buffer.len() > MAX_EVENT_BYTES {
            return Err(NoAnswer::Unproved(
                "a streamed event is larger than the reader holds".into(),
            ));
        }
        Ok(pieces)
    }

    fn event(&mut self, block: &[u8]) -> Result<Option<String>, NoAnswer> {
        let text = String::from_utf8_lossy(block);
        let data: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        if data.is_empty() {
            return Ok(None);
        }
        let data = data.join("\n");
        if data == "[DONE]" {
            self.done = true;
            return Ok(None);
        }
        let Ok(value) = serde_json::from_str::<Value>(&data) else {
            return Err(NoAnswer::Unproved("a streamed event is not JSON".into()));
        };
        match self.api {
            Api::Responses => self.responses_event(&value),
            Api::ChatCompletions => Ok(self.chat_event(&value)),
        }
    }

    fn responses_event(&mut self, value: &Value) -> Result<Option<String>, NoAnswer> {
        let delta = || {
            value
                .get("delta")
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        match value.get("type").and_then(Value::as_str) {
            Some("response.output_text.delta") => {
                let piece = delta().to_string();
                self.text.push_str(&piece);
                Ok((!piece.is_empty()).then_some(piece))
            }
            Some("response.refusal.delta") => {
                self.refusal.push_str(delta());
                Ok(None)
            }
            Some("response.completed" | "response.incomplete" | "response.failed") => {
                self.terminal = value.get("response").cloned();
                Ok(None)
            }
            Some("error") => {
                self.failed = true;
                Ok(None)
            }
            _ => Ok(None),
        }
    }

    fn chat_event(&mut self, value: &Value) -> Option<String> {
        let choice = value.pointer("/choices/0")?;
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(reason.to_string());
        }
        if let Some(refusal) = choice.pointer("/delta/refusal").and_then(Value::as_str) {
            self.refusal.push_str(refusal);
        }
        let piece = choice.pointer("/delta/content").and_then(Value::as_str)?;
        self.text.push_str(piece);
        (!piece.is_empty()).then(|| piece.to_string())
    }

    /// The answer, once the stream ended.
    pub fn finish(self) -> Result<Answer, NoAnswer> {
        if self.failed {
            return Err(NoAnswer::Failed(
                "the endpoint reported an error in the stream".into(),
            ));
        }
        match self.api {
            Api::Responses => {
                let Some(response) = self.terminal else {
                    return Err(NoAnswer::Unproved(
                        "the stream ended before the response was complete".into(),
                    ));
                };
                let mut answer = wire::answer(Api::Responses, &response)?;
                // A terminal event may omit the output it already streamed.
                if answer.text.is_empty() && answer.outcome != wire::Outcome::Blocked {
                    answer.text = self.text;
                }
                if !self.refusal.is_empty() {
                    answer = Answer {
                        outcome: wire::Outcome::Blocked,
                        text: self.refusal,
                    };
                }
                Ok(answer)
            }
            Api::ChatCompletions => {
                if self.finish.is_none() {
                    return Err(NoAnswer::Unproved(
                        "the stream ended before its finish reason".into(),
                    ));
                }
                let refusal = (!self.refusal.is_empty()).then_some(self.refusal);
                let body = json!({"choices": [{
                    "finish_reason": self.finish,
                    "message": {"content": self.text, "refusal": refusal},
                }]});
                wire::answer(Api::ChatCompletions, &body)
            }
        }
    }
}

/// The end of the first complete event in `buffer` and the length of its
/// separator (a blank line, `\n\n` or `\r\n\r\n`).
fn event_end(buffer: &[u8]) -> Option<(usize, usize)> {
    let lf = buffer.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2));
    let crlf = buffer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// The `events` item for one piece of text.
pub fn chunk_item(text: &str) -> Value {
    json!({ "sessionUpdate": "agent_message_chunk", "content": { "type": "text", "text": text } })
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::Outcome;

    fn feed_all(stream: &mut Stream, text: &str) -> Vec<String> {
        // Split at every byte boundary's worth of chunks: events may arrive cut anywhere.
        let mut pieces = Vec::new();
        for chunk in text.as_bytes().chunks(7) {
            pieces.extend(stream.feed(chunk).unwrap());
        }
        pieces
    }

    #[test]
    fn a_responses_stream_yields_deltas_and_the_terminal_answer() {
        let mut s = Stream::new(Api::Responses);
        let sse = "event: response.created\ndata: {\"type\":\"response.created\"}\n\n\
                   event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hel\"}\n\n\
                   data: {\"type\":\"response.output_text.delta\",\"delta\":\"lo\"}\r\n\r\n\
                   data: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"output\":[]}}\n\n";
        assert_eq!(feed_all(&mut s, sse), vec!["Hel", "lo"]);
        assert_eq!(
            s.finish(),
            Ok(Answer {
                outcome: Outcome::Completed,
                text: "Hello".into()
            })
        );
    }

    #[test]
    fn a_cut_responses_stream_is_unproved() {
        let mut s = Stream::new(Api::Responses);
        feed_all(
            &mut s,
            "data: {\"type\":\"response.output_text.delta\",\"delta\":\"Hel\"}\n\n",
        );
        assert!(matches!(s.finish(), Err(NoAnswer::Unproved(_))));
    }

    #[test]
    fn a_chat_stream_yields_deltas_and_maps_its_finish_reason() {
        let mut s = Stream::new(Api::ChatCompletions);
        let sse = "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n\
                   data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n\
                   data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}]}\n\n\
                   data: [DONE]\n\n";
        assert_eq!(feed_all(&mut s, sse), vec!["Hi"]);
        assert_eq!(
            s.finish(),
            Ok(Answer {
                outcome: Outcome::Limit,
                text: "Hi".into()
            })
        );
        let mut cut = Stream::new(Api::ChatCompletions);
        feed_all(
            &mut cut,
            "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n",
        );
        assert!(matches!(cut.finish(), Err(NoAnswer::Unproved(_))));
    }

    #[test]
    fn an_event_past_the_bound_is_unproved() {
        let mut s = Stream::new(Api::ChatCompletions);
        let big = vec![b'x'; MAX_EVENT_BYTES + 1];
        assert!(matches!(s.feed(&big), Err(NoAnswer::Unproved(_))));
    }
}
