//! The status line the page keeps in `<pre id="status">`: its last line is
//! one JSON object, for people and for scripts (the browser tests read it).

use serde::Serialize;

/// What the page is doing.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Status {
    /// The baked folder's URL as the page fetched it.
    pub scene: String,
    /// Particles in the simulation (0 until loaded).
    pub particles: u64,
    /// Steps taken (advances while playing).
    pub step: u64,
    /// The WebGPU adapter, as the browser describes it.
    pub adapter: String,
    /// `None`, or what went wrong, in one line.
    pub error: Option<String>,
    /// Whether the simulation is stepping.
    pub playing: bool,
    /// Milliseconds per step over the last batch (0 before the first).
    pub ms_per_step: f64,
}

impl Status {
    /// The JSON line.
    pub fn json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// A line for people, then the JSON line.
    pub fn text(&self) -> String {
        let head = match &self.error {
            Some(e) => format!("error: {e}"),
            None if self.particles == 0 => format!("loading {} ...", self.scene),
            None => format!(
                "{}: {} particles, step {}{} on {}",
                self.scene,
                self.particles,
                self.step,
                if self.playing { "" } else { " (paused)" },
                self.adapter
            ),
        };
        format!("{head}\n{}", self.json())
    }

    /// Records `error` as one line (the first line of a longer message).
    pub fn fail(&mut self, error: &str) {
        let line = error.lines().next().unwrap_or("").trim().to_owned();
        self.error = Some(line);
        self.playing = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_line_is_one_json_object_with_the_fields_scripts_read() {
        let mut s = Status {
            scene: "scene/".into(),
            ..Default::default()
        };
        let last = |s: &Status| {
            let text = s.text();
            let line = text.lines().last().unwrap_or_default().to_owned();
            serde_json::from_str::<serde_json::Value>(&line).expect("JSON")
        };
        let v = last(&s);
        for key in ["scene", "particles", "step", "adapter", "error"] {
            assert!(v.get(key).is_some(), "{key}");
        }
        assert!(v["error"].is_null());
        s.fail("object 1234: content hash mismatch\nmore detail");
        let v = last(&s);
        assert_eq!(v["error"], "object 1234: content hash mismatch");
        assert_eq!(v["playing"], false);
    }
}
