//! A byte-level Server-Sent Events decoder: bytes go in as they arrive (split anywhere, even
//! inside a UTF-8 character), complete events come out. Only whole lines are ever decoded
//! as text, so a split never corrupts a character.

/// One dispatched event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, when present.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// The longest line accepted before the stream is declared broken (16 MiB).
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Incremental decoder; feed it with [`SseDecoder::push`].
#[derive(Debug, Default)]
pub struct SseDecoder {
    pending: Vec<u8>,
    /// Bytes of `pending` already known to hold no line break.
    scanned: usize,
    event: Option<String>,
    data: Vec<String>,
}

/// The stream held a line longer than [`MAX_LINE_BYTES`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("an event-stream line exceeded {MAX_LINE_BYTES} bytes without a line break")]
pub struct LineTooLong;

impl SseDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends bytes and returns the events completed by them.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, LineTooLong> {
        self.pending.extend_from_slice(bytes);
        let mut events = Vec::new();
        let mut start = 0;
        let mut from = self.scanned;
        while let Some(offset) = self.pending[from..].iter().position(|&b| b == b'\n') {
            let end = from + offset;
            let mut line = &self.pending[start..end];
            if let [rest @ .., b'\r'] = line {
                line = rest;
            }
            let line = String::from_utf8_lossy(line).into_owned();
            start = end + 1;
            from = start;
            if let Some(event) = self.line(&line) {
                events.push(event);
            }
        }
        self.pending.drain(..start);
        self.scanned = self.pending.len();
        if self.pending.len() > MAX_LINE_BYTES {
            return Err(LineTooLong);
        }
        Ok(events)
    }

    /// Ends the stream: an event not yet closed by a blank line is dispatched.
    pub fn finish(&mut self) -> Option<SseEvent> {
        if !self.pending.is_empty() {
            let rest = std::mem::take(&mut self.pending);
            self.scanned = 0;
            let line = String::from_utf8_lossy(&rest).into_owned();
            if let Some(event) = self.line(&line) {
                return Some(event);
            }
        }
        self.dispatch()
    }

    fn line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = Some(value.to_string()),
            "data" => self.data.push(value.to_string()),
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        if self.data.is_empty() && self.event.is_none() {
            return None;
        }
        let event = SseEvent { event: self.event.take(), data: std::mem::take(&mut self.data).join("\n") };
        Some(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STREAM: &str =
        "event: a\ndata: {\"t\":\"héllo ✓ 𝄞\"}\n\n: comment\r\ndata: one\r\ndata: two\r\n\r\ndata:[DONE]\n\n";

    fn expected() -> Vec<SseEvent> {
        vec![
            SseEvent { event: Some("a".into()), data: "{\"t\":\"héllo ✓ 𝄞\"}".into() },
            SseEvent { event: None, data: "one\ntwo".into() },
            SseEvent { event: None, data: "[DONE]".into() },
        ]
    }

    #[test]
    fn every_single_split_point_decodes_the_same() {
        let bytes = STREAM.as_bytes();
        for cut in 0..=bytes.len() {
            let mut d = SseDecoder::new();
            let mut got = d.push(&bytes[..cut]).unwrap();
            got.extend(d.push(&bytes[cut..]).unwrap());
            assert_eq!(d.finish(), None);
            assert_eq!(got, expected(), "split at byte {cut}");
        }
    }

    #[test]
    fn byte_by_byte_decodes_the_same() {
        let mut d = SseDecoder::new();
        let mut got = Vec::new();
        for b in STREAM.as_bytes() {
            got.extend(d.push(std::slice::from_ref(b)).unwrap());
        }
        assert_eq!(got, expected());
    }

    #[test]
    fn an_unterminated_last_event_is_flushed_at_the_end() {
        let mut d = SseDecoder::new();
        assert!(d.push(b"data: x").unwrap().is_empty());
        assert_eq!(d.finish(), Some(SseEvent { event: None, data: "x".into() }));
    }
}
