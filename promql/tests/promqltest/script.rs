//! Reads a `.test` script (format: `shared/promql/FORMAT.md`) into commands.

use promql::parser::{duration::parse_duration_ms, parse_metric, strings::unquote};
use storage::Labels;

use crate::values::{Slot, expand, expand_start_offsets, parse_float, split_series};

/// Text that an error or annotation must match.
#[derive(Debug, Clone)]
pub enum TextMatch {
    Any,
    Exact(String),
    Regex(regex::Regex),
}

impl TextMatch {
    pub fn matches(&self, s: &str) -> bool {
        match self {
            TextMatch::Any => !s.contains('\n'),
            TextMatch::Exact(e) => s == e,
            TextMatch::Regex(r) => r.is_match(s),
        }
    }
}

/// What an eval expects of warnings or of infos.
#[derive(Debug, Clone, Default)]
pub enum AnnotationCheck {
    /// Neither `expect warn` nor `expect no_warn`: not checked.
    #[default]
    Unchecked,
    /// `expect no_warn` / `expect no_info`.
    None,
    /// One or more `expect warn` / `expect info` lines.
    Lines(Vec<TextMatch>),
}

/// When an eval runs.
#[derive(Debug, Clone, Copy)]
pub enum When {
    Instant(i64),
    Range { start: i64, end: i64, step: i64 },
}

/// One `eval` block.
#[derive(Debug, Clone)]
pub struct Eval {
    pub line: usize,
    pub expr: String,
    pub when: When,
    pub fail: Option<TextMatch>,
    pub warn: AnnotationCheck,
    pub info: AnnotationCheck,
    pub ordered: bool,
    pub range_vector: Option<(i64, i64, i64)>,
    pub string: Option<String>,
    pub scalar: Option<f64>,
    /// Expected series in the order written (a repeated label set replaces the earlier line).
    pub series: Vec<(Labels, Vec<Slot>)>,
}

/// One series line of a `load` block.
#[derive(Debug, Clone)]
pub struct LoadSeries {
    pub labels: Labels,
    pub slots: Vec<Slot>,
    /// From the `<series>@st` line before it: per slot, the start timestamp's offset from the
    /// sample's time (`None`: unknown). Empty without such a line.
    pub start_offsets: Vec<Option<i64>>,
}

/// A script command.
#[derive(Debug, Clone)]
pub enum Command {
    Clear,
    /// `nhcb`: `load_with_nhcb`, which also stores classic histograms as custom-bucket ones.
    Load {
        interval_ms: i64,
        nhcb: bool,
        series: Vec<LoadSeries>,
    },
    Eval(Box<Eval>),
}

fn parse_time(s: &str) -> Result<i64, String> {
    parse_duration_ms(s)
}

/// Splits off the first `n` whitespace-separated words; returns them and the rest of the line.
fn words(line: &str, n: usize) -> Option<(Vec<&str>, &str)> {
    let mut rest = line;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = rest.trim_start();
        let end = t.find(char::is_whitespace).unwrap_or(t.len());
        if end == 0 {
            return None;
        }
        out.push(&t[..end]);
        rest = &t[end..];
    }
    Some((out, rest.trim()))
}

fn parse_header(line: &str, lineno: usize) -> Result<Eval, String> {
    let (w, _) = words(line, 2).ok_or("bad eval header")?;
    let keyword = w[0].to_ascii_lowercase();
    let mut e = Eval {
        line: lineno,
        expr: String::new(),
        when: When::Instant(0),
        fail: None,
        warn: AnnotationCheck::Unchecked,
        info: AnnotationCheck::Unchecked,
        ordered: false,
        range_vector: None,
        string: None,
        scalar: None,
        series: Vec::new(),
    };
    match keyword.as_str() {
        "eval" => {}
        "eval_fail" => e.fail = Some(TextMatch::Any),
        "eval_warn" => e.warn = AnnotationCheck::Lines(vec![TextMatch::Any]),
        "eval_info" => e.info = AnnotationCheck::Lines(vec![TextMatch::Any]),
        "eval_ordered" => e.ordered = true,
        other => return Err(format!("unknown eval keyword {other:?}")),
    }
    match w[1] {
        "instant" => {
            let (w, rest) = words(line, 4).ok_or("bad instant eval header")?;
            if w[2] != "at" {
                return Err("instant eval needs `at <time>`".into());
            }
            e.when = When::Instant(parse_time(w[3])?);
            e.expr = rest.to_string();
        }
        "range" => {
            let (w, rest) = words(line, 8).ok_or("bad range eval header")?;
            if w[2] != "from" || w[4] != "to" || w[6] != "step" {
                return Err("range eval needs `from <t> to <t> step <d>`".into());
            }
            let (start, end, step) = (parse_time(w[3])?, parse_time(w[5])?, parse_time(w[7])?);
            if end < start {
                return Err("range eval ends before it starts".into());
            }
            e.when = When::Range { start, end, step };
            e.expr = rest.to_string();
        }
        other => return Err(format!("unknown eval kind {other:?}")),
    }
    Ok(e)
}

fn text_match(kind: &str, rest: &str) -> Result<TextMatch, String> {
    let rest = rest.trim();
    if let Some(m) = rest.strip_prefix("msg:") {
        return Ok(TextMatch::Exact(m.trim().to_string()));
    }
    if let Some(r) = rest.strip_prefix("regex:") {
        return regex::Regex::new(r.trim()).map(TextMatch::Regex).map_err(|e| format!("bad regex: {e}"));
    }
    if rest.is_empty() {
        return Ok(TextMatch::Any);
    }
    Err(format!("unexpected text after `expect {kind}`: {rest:?}"))
}

fn add_line(check: &mut AnnotationCheck, m: TextMatch) {
    match check {
        AnnotationCheck::Lines(v) => v.push(m),
        _ => *check = AnnotationCheck::Lines(vec![m]),
    }
}

fn parse_body_line(e: &mut Eval, line: &str) -> Result<(), String> {
    if let Some(rest) = line.strip_prefix("expect ") {
        let (w, tail) = words(rest, 1).ok_or("empty expect line")?;
        let kind = w[0];
        match kind {
            "fail" => e.fail = Some(text_match(kind, tail)?),
            "warn" => add_line(&mut e.warn, text_match(kind, tail)?),
            "info" => add_line(&mut e.info, text_match(kind, tail)?),
            "no_warn" => e.warn = AnnotationCheck::None,
            "no_info" => e.info = AnnotationCheck::None,
            "ordered" => e.ordered = true,
            "string" => {
                e.string = Some(unquote(tail.trim()).map_err(|err| format!("bad string: {err}"))?.value)
            }
            "range" => {
                let (w, _) = words(tail, 7).ok_or("bad `expect range vector` line")?;
                if w[0] != "vector" || w[1] != "from" || w[3] != "to" || w[5] != "step" {
                    return Err("bad `expect range vector` line".into());
                }
                let (s, t, st) = (parse_time(w[2])?, parse_time(w[4])?, parse_time(w[6])?);
                e.range_vector = Some((s, t, st));
                e.when = When::Instant(t);
            }
            other => return Err(format!("unknown expectation {other:?}")),
        }
        return Ok(());
    }
    if let Some(m) = line.strip_prefix("expected_fail_message") {
        e.fail = Some(TextMatch::Exact(m.trim().to_string()));
        return Ok(());
    }
    if let Some(r) = line.strip_prefix("expected_fail_regexp") {
        e.fail = Some(TextMatch::Regex(regex::Regex::new(r.trim()).map_err(|err| err.to_string())?));
        return Ok(());
    }
    // A bare number is a scalar result; anything else a series line.
    let first = line.split_whitespace().next().unwrap_or("");
    if !first.starts_with('{') && parse_float(first).is_some() {
        e.scalar = parse_float(first);
        return Ok(());
    }
    let (metric, values) = split_series(line)?;
    let labels = parse_metric(metric).map_err(|err| format!("bad metric {metric:?}: {}", err.msg))?;
    let slots = expand(values)?;
    e.series.retain(|(l, _)| *l != labels);
    e.series.push((labels, slots));
    Ok(())
}

/// Parses a whole script.
pub fn parse_script(text: &str) -> Result<Vec<(usize, Command)>, String> {
    let lines: Vec<String> = text
        .split('\n')
        .map(|l| {
            let t = l.trim();
            if t.starts_with('#') { String::new() } else { t.to_string() }
        })
        .collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = &lines[i];
        let lineno = i + 1;
        if line.is_empty() {
            i += 1;
            continue;
        }
        let first = line.split_whitespace().next().unwrap_or("").to_ascii_lowercase();
        let mut body = Vec::new();
        let mut j = i + 1;
        while j < lines.len() && !lines[j].is_empty() {
            body.push(lines[j].as_str());
            j += 1;
        }
        let err = |e: String| format!("line {lineno}: {e}");
        if first == "clear" {
            // `clear` has no body; the next line may start another command right away.
            out.push((lineno, Command::Clear));
            i += 1;
            continue;
        } else if first.starts_with("load") {
            let (w, _) = words(line, 2).ok_or_else(|| err("load needs an interval".into()))?;
            let interval_ms = parse_time(w[1]).map_err(err)?;
            let mut series = Vec::new();
            // A `<series>@st` line waiting for the sample line it belongs to.
            let mut pending: Option<(Labels, Vec<Option<i64>>)> = None;
            for b in body {
                let (metric, values) = split_series(b).map_err(err)?;
                let labels =
                    parse_metric(metric).map_err(|e| err(format!("bad metric {metric:?}: {}", e.msg)))?;
                if let Some(items) = values.strip_prefix("@st") {
                    if pending.is_some() {
                        return Err(err("@st line has no following sample line".into()));
                    }
                    pending = Some((labels, expand_start_offsets(items).map_err(err)?));
                    continue;
                }
                let slots = expand(values).map_err(err)?;
                let start_offsets = match pending.take() {
                    None => Vec::new(),
                    Some((l, _)) if l != labels => {
                        return Err(err("@st metric does not match the following sample line".into()));
                    }
                    Some((_, offsets)) if offsets.len() != slots.len() => {
                        return Err(err(format!(
                            "@st line has {} values but the sample line has {}",
                            offsets.len(),
                            slots.len()
                        )));
                    }
                    Some((_, offsets)) => offsets,
                };
                series.retain(|s: &LoadSeries| s.labels != labels);
                series.push(LoadSeries { labels, slots, start_offsets });
            }
            if pending.is_some() {
                return Err(err("@st line has no following sample line".into()));
            }
            out.push((lineno, Command::Load { interval_ms, nhcb: first == "load_with_nhcb", series }));
        } else if first.starts_with("eval") {
            let mut e = parse_header(line, lineno).map_err(err)?;
            for b in body {
                parse_body_line(&mut e, b).map_err(err)?;
            }
            out.push((lineno, Command::Eval(Box::new(e))));
        } else {
            return Err(err(format!("unknown command {first:?}")));
        }
        i = j;
    }
    Ok(out)
}
