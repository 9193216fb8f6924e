//! The report: one row per check (what was checked, what was found, what to do), printed as
//! a table or as JSON, and the exit status it gives.

use serde::Serialize;

/// What a check found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Present and working.
    Ok,
    /// Works, but with a fallback or without an optional feature; the row says which.
    Warn,
    /// Missing or broken.
    Fail,
    /// Could not run here (no GPU, no device, an earlier failure); the row says why and
    /// whether it matters.
    Skip,
}

impl Status {
    fn label(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Warn => "WARN",
            Self::Fail => "FAIL",
            Self::Skip => "skip",
        }
    }
}

/// One check's outcome.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Row {
    /// A stable identifier for scripts (`devx_context`).
    pub id: &'static str,
    /// What was checked, for people.
    pub check: &'static str,
    /// What it found.
    pub status: Status,
    /// Whether a failure of this check stops ibgda's queues on this host (then a `Fail`
    /// makes the exit status 1).
    pub needed: bool,
    /// What was found, with the values involved.
    pub result: String,
    /// What to do about it (empty when nothing is to be done).
    pub remedy: String,
    /// How it was found out: the calls made and the files read.
    pub how: String,
}

impl Row {
    /// A row; `needed` is set by the caller's table of checks.
    pub fn new(id: &'static str, check: &'static str, status: Status) -> Self {
        Self {
            id,
            check,
            status,
            needed: false,
            result: String::new(),
            remedy: String::new(),
            how: String::new(),
        }
    }

    /// Sets what the check found.
    pub fn status(mut self, status: Status) -> Self {
        self.status = status;
        self
    }

    /// Marks the row as one ibgda needs.
    pub fn needed(mut self) -> Self {
        self.needed = true;
        self
    }

    /// What was found.
    pub fn result(mut self, text: impl Into<String>) -> Self {
        self.result = text.into();
        self
    }

    /// What to do.
    pub fn remedy(mut self, text: impl Into<String>) -> Self {
        self.remedy = text.into();
        self
    }

    /// How it was found out.
    pub fn how(mut self, text: impl Into<String>) -> Self {
        self.how = text.into();
        self
    }

    /// Whether this row fails the run.
    pub fn fails_run(&self) -> bool {
        self.needed && self.status == Status::Fail
    }
}

/// The whole report.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The tool.
    pub tool: &'static str,
    /// Its version.
    pub version: &'static str,
    /// Whether everything needed is there (the exit status is 0 exactly then).
    pub ok: bool,
    /// The doorbell path ibgda's GPU producers get on this host (`gpu`, `cpu-assisted`,
    /// `proxy`), `host` when there is no GPU, `none` when no NIC can be used.
    pub doorbell_path: &'static str,
    /// The rows, in the order bring-up meets them.
    pub checks: Vec<Row>,
}

impl Report {
    /// The report of `checks`, with the path the doorbell row found.
    pub fn new(checks: Vec<Row>, doorbell_path: &'static str) -> Self {
        Self {
            tool: "ibgda-doctor",
            version: env!("CARGO_PKG_VERSION"),
            ok: !checks.iter().any(Row::fails_run),
            doorbell_path,
            checks,
        }
    }

    /// 0 when everything needed is there, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        u8::from(!self.ok)
    }

    /// The report as JSON.
    pub fn json(&self) -> String {
        // A tree of strings, booleans and plain enums always serializes.
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// The report as a table: status, check, result (with how it was found), what to do.
    pub fn table(&self) -> String {
        const CHECK: usize = 22;
        const RESULT: usize = 50;
        const REMEDY: usize = 58;
        let mut out = String::new();
        out.push_str(&format!(
            "{} {}: this host, checked in the order bring-up fails\n\n",
            self.tool, self.version
        ));
        out.push_str(&format!(
            "{:<4}  {:<CHECK$}  {:<RESULT$}  {}\n",
            "", "check", "result", "what to do"
        ));
        for row in &self.checks {
            let mut result = wrap(&row.result, RESULT);
            // How a check found out matters where it ran; a skipped row says why it did not.
            if !row.how.is_empty() && row.status != Status::Skip {
                result.extend(wrap(&format!("how: {}", row.how), RESULT));
            }
            let remedy = wrap(&row.remedy, REMEDY);
            let check = wrap(row.check, CHECK);
            let lines = result.len().max(remedy.len()).max(check.len()).max(1);
            for i in 0..lines {
                let status = if i == 0 { row.status.label() } else { "" };
                let cell = |v: &Vec<String>| v.get(i).cloned().unwrap_or_default();
                let line = format!(
                    "{status:<4}  {:<CHECK$}  {:<RESULT$}  {}",
                    cell(&check),
                    cell(&result),
                    cell(&remedy)
                );
                out.push_str(line.trim_end());
                out.push('\n');
            }
        }
        let failed: Vec<&str> = self
            .checks
            .iter()
            .filter(|r| r.fails_run())
            .map(|r| r.check)
            .collect();
        out.push('\n');
        if failed.is_empty() {
            out.push_str(&format!(
                "everything ibgda needs is here; doorbell path: {}\n",
                self.doorbell_path
            ));
        } else {
            out.push_str(&format!(
                "ibgda cannot run its queues here: {} needed check{} failed ({}); doorbell \
                 path: {}\n",
                failed.len(),
                if failed.len() == 1 { "" } else { "s" },
                failed.join(", "),
                self.doorbell_path
            ));
        }
        out
    }
}

/// `text` broken into lines of at most `width` characters at spaces (a longer word gets a
/// line of its own).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let needed = if line.is_empty() {
            word.chars().count()
        } else {
            line.chars().count() + 1 + word.chars().count()
        };
        if needed > width && !line.is_empty() {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_needed_failure_fails_the_run() {
        let rows = vec![
            Row::new("a", "a", Status::Fail),
            Row::new("b", "b", Status::Warn).needed(),
            Row::new("c", "c", Status::Skip).needed(),
        ];
        let report = Report::new(rows, "host");
        assert!(report.ok);
        assert_eq!(report.exit_code(), 0);
        let report = Report::new(vec![Row::new("d", "d", Status::Fail).needed()], "none");
        assert!(!report.ok);
        assert_eq!(report.exit_code(), 1);
        assert!(report.table().contains("1 needed check failed (d)"));
    }

    #[test]
    fn wrapping_keeps_every_word_in_order_within_the_width() {
        let text = "the kernel refused a DEVX context on `mlx5_0` (EPERM (1)): DEVX needs \
                    mlx5_ib with DEVX support";
        let lines = wrap(text, 20);
        assert!(lines.iter().all(|l| l.chars().count() <= 20), "{lines:?}");
        assert_eq!(
            lines.join(" ").split_whitespace().collect::<Vec<_>>(),
            text.split_whitespace().collect::<Vec<_>>()
        );
        // A word longer than the width stands alone rather than being cut.
        assert_eq!(wrap("a /sys/class/infiniband/mlx5_0 b", 10).len(), 3);
        assert!(wrap("", 10).is_empty());
    }

    #[test]
    fn the_json_names_every_field() {
        let row = Row::new("uar", "UAR allocation", Status::Fail)
            .needed()
            .result("r")
            .remedy("do")
            .how("h");
        let json: serde_json::Value =
            serde_json::from_str(&Report::new(vec![row], "none").json()).unwrap();
        assert_eq!(json["ok"], false);
        assert_eq!(json["doorbell_path"], "none");
        let row = &json["checks"][0];
        for (key, value) in [
            ("id", "uar"),
            ("check", "UAR allocation"),
            ("status", "fail"),
            ("result", "r"),
            ("remedy", "do"),
            ("how", "h"),
        ] {
            assert_eq!(row[key], value, "{key}");
        }
        assert_eq!(row["needed"], true);
    }
}
