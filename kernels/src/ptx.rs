//! Reading the ordering instructions out of PTX, and the expected ones out of a scope's
//! documented device sequence ([`ibgda::order::OrderingScope::DEVICE_SEQUENCE`]).
//!
//! An *ordering instruction* is a fence (`fence.*`, `membar.*`) or a memory operation
//! with a memory-order or strength qualifier (`.relaxed`, `.acquire`, `.release`,
//! `.acq_rel`, `.sc`, `.volatile`, `.mmio`), or an atomic (`atom.*`, `red.*`: relaxed
//! by default). Plain (weak) loads and stores are not: they are what the ordering orders.

/// The ordering instructions of one kernel (`.entry`), in program-text order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelOrdering {
    /// The entry's name.
    pub kernel: String,
    /// Its ordering instructions (opcode with qualifiers, no operands).
    pub instructions: Vec<String>,
}

const STRONG: [&str; 7] = [
    ".relaxed",
    ".acquire",
    ".release",
    ".acq_rel",
    ".sc",
    ".volatile",
    ".mmio",
];

/// Whether an opcode (with its qualifiers) is an ordering instruction.
pub fn is_ordering(opcode: &str) -> bool {
    if opcode.starts_with("fence") || opcode.starts_with("membar") {
        return true;
    }
    if opcode.starts_with("atom.") || opcode.starts_with("red.") {
        return true;
    }
    let mem = opcode.starts_with("ld.") || opcode.starts_with("st.");
    mem && STRONG
        .iter()
        .any(|q| opcode.split('.').any(|p| format!(".{p}") == *q))
}

/// Every `.entry` of a PTX module with its ordering instructions, the instructions of the
/// device functions it calls (`.func`, not inlined) included at the call site.
pub fn kernel_orderings(ptx: &str) -> Vec<KernelOrdering> {
    let blocks = blocks(ptx);
    let funcs: std::collections::HashMap<&str, &Block> =
        blocks.iter().map(|b| (b.name.as_str(), b)).collect();
    blocks
        .iter()
        .filter(|b| b.entry)
        .map(|b| {
            let mut instructions = Vec::new();
            flatten(b, &funcs, &mut instructions, 0);
            KernelOrdering {
                kernel: b.name.clone(),
                instructions,
            }
        })
        .collect()
}

struct Block {
    name: String,
    entry: bool,
    /// Ordering instructions, and calls as `call:<callee>`.
    items: Vec<String>,
}

fn flatten(
    b: &Block,
    funcs: &std::collections::HashMap<&str, &Block>,
    out: &mut Vec<String>,
    depth: usize,
) {
    for item in &b.items {
        match item.strip_prefix("call:") {
            Some(callee) => {
                if let Some(f) = funcs.get(callee).filter(|_| depth < 16) {
                    flatten(f, funcs, out, depth + 1);
                }
            }
            None => out.push(item.clone()),
        }
    }
}

fn header_name(line: &str) -> Option<(String, bool)> {
    let entry = line.contains(".entry ");
    if !entry && !line.contains(".func ") {
        return None;
    }
    let keyword = if entry { ".entry " } else { ".func " };
    let mut rest = &line[line.find(keyword)? + keyword.len()..];
    rest = rest.trim_start();
    // `.func (.param .b32 func_retval0) name(`: skip the return parameter list.
    if rest.starts_with('(') {
        rest = &rest[rest.find(')')? + 1..];
    }
    let name = rest.trim_start().split(['(', ' ', ';']).next()?.trim();
    (!name.is_empty()).then(|| (name.to_string(), entry))
}

fn callee(line: &str) -> Option<String> {
    let rest = line.strip_prefix("call")?;
    // Drop the parenthesized return and argument lists.
    let mut bare = String::new();
    let mut parens = 0;
    for c in rest.chars() {
        match c {
            '(' => parens += 1,
            ')' => parens -= 1,
            _ if parens == 0 => bare.push(c),
            _ => {}
        }
    }
    bare.split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')' || c == ';')
        .skip(1)
        .find(|t| t.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_' || c == '$'))
        .map(str::to_string)
}

fn blocks(ptx: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut pending: Option<(String, bool)> = None;
    let mut current: Option<Block> = None;
    let mut depth = 0i32;
    let mut awaiting_callee = false;
    for raw in ptx.lines() {
        let line = raw.split("//").next().unwrap_or("").trim();
        if current.is_none() {
            if let Some(h) = header_name(line) {
                pending = Some(h);
            }
            if pending.is_some() && line.contains('{') {
                let (name, entry) = pending.take().expect("pending header");
                current = Some(Block {
                    name,
                    entry,
                    items: Vec::new(),
                });
                depth = 1;
            } else if pending.is_some() && line.ends_with(';') {
                pending = None; // a declaration
            }
            continue;
        }
        let Some(b) = current.as_mut() else { continue };
        if awaiting_callee {
            // `call.uni (retval0),` / callee on the next line (NVRTC's layout).
            if let Some(name) = line
                .split(|c: char| c.is_whitespace() || c == ',' || c == ';')
                .find(|t| t.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_' || c == '$'))
            {
                b.items.push(format!("call:{name}"));
                awaiting_callee = false;
            }
        }
        let mut tokens = line.split_whitespace();
        let mut first = tokens.next().unwrap_or("");
        if first.starts_with('@') {
            first = tokens.next().unwrap_or("");
        }
        let opcode = first.trim_end_matches(';');
        if opcode.starts_with("call") {
            let rest = line[line.find("call").unwrap_or(0)..].to_string();
            match callee(&rest) {
                Some(c) => b.items.push(format!("call:{c}")),
                None => awaiting_callee = true,
            }
        } else if !opcode.is_empty() && is_ordering(opcode) {
            b.items.push(opcode.to_string());
        }
        for c in line.chars() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
        }
        if depth <= 0 {
            out.extend(current.take());
        }
    }
    out
}

/// The ordering instructions of `kernel` in `ptx`, if it has that entry.
pub fn ordering_of(ptx: &str, kernel: &str) -> Option<Vec<String>> {
    kernel_orderings(ptx)
        .into_iter()
        .find(|k| k.kernel == kernel)
        .map(|k| k.instructions)
}

/// The lines of an entry's body (after its parameter list), trimmed, without blank lines,
/// comments and `.loc` directives; `None` if `ptx` has no such entry or it is unterminated.
pub fn entry_body(ptx: &str, name: &str) -> Option<Vec<String>> {
    let start = ptx.find(&format!(".entry {name}("))?;
    let params_end = start + ptx[start..].find(')')?;
    let open = params_end + ptx[params_end..].find('{')?;
    let mut depth = 0;
    let mut end = None;
    for (i, c) in ptx[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    end = Some(open + i);
                    break;
                }
            }
            _ => {}
        }
    }
    Some(
        ptx[open + 1..end?]
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("//") && !l.starts_with(".loc"))
            .map(str::to_string)
            .collect(),
    )
}

/// A PTX line with register numbers (`%rd12` -> `%rd`) and label numbers
/// (`$L__BB3_7` -> `$L__BB`) left out: what stays when the compiler renumbers.
pub fn without_numbers(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if c != '%' && c != '$' {
            continue;
        }
        while let Some(&n) = chars.peek() {
            if n.is_ascii_alphabetic() || n == '_' {
                out.push(n);
                chars.next();
            } else {
                break;
            }
        }
        while chars
            .peek()
            .is_some_and(|n| n.is_ascii_digit() || *n == '_')
        {
            chars.next();
        }
    }
    out
}

/// One basic block of an entry: its label, its instructions, and how it ends.
struct BasicBlock<'a> {
    label: Option<&'a str>,
    lines: Vec<&'a str>,
}

/// How a block's last instruction leaves it.
enum Exit<'a> {
    /// `ret` or `exit`: the path is complete.
    Return,
    /// `trap`: the path ends without completing.
    Trap,
    /// `bra` to a label, taken always or only when its predicate holds.
    Branch { target: &'a str, conditional: bool },
    /// Into the next block.
    FallThrough,
}

fn exit_of(line: &str) -> Exit<'_> {
    let mut tokens = line.split_whitespace();
    let mut first = tokens.next().unwrap_or("");
    let conditional = first.starts_with('@');
    if conditional {
        first = tokens.next().unwrap_or("");
    }
    let opcode = first.trim_end_matches(';');
    if opcode == "ret" || opcode == "exit" {
        Exit::Return
    } else if opcode == "trap" {
        Exit::Trap
    } else if opcode == "bra" || opcode.starts_with("bra.") {
        let target = tokens.next().unwrap_or("").trim_end_matches(';');
        Exit::Branch {
            target,
            conditional,
        }
    } else {
        Exit::FallThrough
    }
}

/// The paths through an entry's body (its lines as [`entry_body`] gives them) from its
/// first instruction to a `ret` or `exit` that visit no basic block twice and read no
/// `%globaltimer`, each as its instructions in order (branches included, directives and
/// braces left out). With waits that read the clock only once a check has failed (the
/// device library's `Deadline`), these are what the kernel runs when every wait succeeds
/// at its first check: its fast paths. `None` when the body has a branch this reader does
/// not follow (an unknown label, `brx`) or more than `limit` such paths.
pub fn clock_free_paths(body: &[String], limit: usize) -> Option<Vec<Vec<String>>> {
    let mut blocks: Vec<BasicBlock<'_>> = vec![BasicBlock {
        label: None,
        lines: Vec::new(),
    }];
    for line in body {
        let line = line.as_str();
        if let Some(label) = line.strip_suffix(':').filter(|l| l.starts_with('$')) {
            blocks.push(BasicBlock {
                label: Some(label),
                lines: Vec::new(),
            });
            continue;
        }
        if line.starts_with('.') || line == "{" || line == "}" {
            continue;
        }
        if line.split_whitespace().any(|t| t.starts_with("brx")) {
            return None;
        }
        let ends = !matches!(exit_of(line), Exit::FallThrough);
        blocks.last_mut().expect("a block").lines.push(line);
        if ends {
            blocks.push(BasicBlock {
                label: None,
                lines: Vec::new(),
            });
        }
    }
    let index: std::collections::HashMap<&str, usize> = blocks
        .iter()
        .enumerate()
        .filter_map(|(i, b)| b.label.map(|l| (l, i)))
        .collect();
    let mut successors = Vec::with_capacity(blocks.len());
    for (i, b) in blocks.iter().enumerate() {
        let next = (i + 1 < blocks.len()).then_some(i + 1);
        let exit = b.lines.last().map_or(Exit::FallThrough, |l| exit_of(l));
        successors.push(match exit {
            Exit::Return => Some(Vec::new()),
            Exit::Trap => None,
            Exit::Branch {
                target,
                conditional,
            } => {
                let t = *index.get(target)?;
                Some(if conditional {
                    [Some(t), next].into_iter().flatten().collect()
                } else {
                    vec![t]
                })
            }
            Exit::FallThrough => Some(next.into_iter().collect()),
        });
    }
    struct Walk<'b, 'a> {
        blocks: &'b [BasicBlock<'a>],
        successors: &'b [Option<Vec<usize>>],
        limit: usize,
        paths: Vec<Vec<String>>,
        overflow: bool,
    }
    fn walk(w: &mut Walk<'_, '_>, block: usize, on_path: &mut Vec<usize>) {
        if w.overflow
            || w.blocks[block]
                .lines
                .iter()
                .any(|l| l.contains("%globaltimer"))
        {
            return;
        }
        on_path.push(block);
        match &w.successors[block] {
            None => {}
            Some(next) if next.is_empty() => {
                if w.paths.len() == w.limit {
                    w.overflow = true;
                } else {
                    w.paths.push(
                        on_path
                            .iter()
                            .flat_map(|&b| w.blocks[b].lines.iter().map(|l| l.to_string()))
                            .collect(),
                    );
                }
            }
            Some(next) => {
                for &n in next {
                    if !on_path.contains(&n) {
                        walk(w, n, on_path);
                    }
                }
            }
        }
        on_path.pop();
    }
    let mut w = Walk {
        blocks: &blocks,
        successors: &successors,
        limit,
        paths: Vec::new(),
        overflow: false,
    };
    walk(&mut w, 0, &mut Vec::new());
    (!w.overflow).then_some(w.paths)
}

/// A documented device sequence split into its doorbell part (everything before the
/// `cq:` label) and its completion part, labels dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sequence {
    /// Around the doorbell record and the doorbell, in order.
    pub doorbell: Vec<String>,
    /// The CQE load and what follows a valid one, in order.
    pub completion: Vec<String>,
}

/// Parses a `DEVICE_SEQUENCE` string (`"label: instr; instr; label: instr"`).
pub fn parse_sequence(seq: &str) -> Sequence {
    let mut s = Sequence {
        doorbell: Vec::new(),
        completion: Vec::new(),
    };
    let mut in_cq = false;
    for item in seq.split(';') {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let instr = match item.split_once(':') {
            // "label: instr" (a label is one word; PTX qualifiers like `L1::` have no space)
            Some((label, rest)) if !label.contains(' ') && rest.starts_with(' ') => {
                if label.trim() == "cq" {
                    in_cq = true;
                }
                rest.trim()
            }
            _ => item,
        };
        if in_cq {
            s.completion.push(instr.to_string());
        } else {
            s.doorbell.push(instr.to_string());
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_ordering_instructions_per_entry() {
        let ptx = "\
.visible .entry a(\n\t.param .u64 a_param_0\n)\n{\n\
\tst.global.v4.u32 \t[%rd1], {%r1, %r2, %r3, %r4};\n\
\tst.relaxed.sys.global.b32 [%rd2], %r5;\n\
\tfence.release.gpu;\n\
\t@%p1 bra $L__BB0_2;\n\
\tst.mmio.relaxed.sys.global.b64 [%rd3], %rd4; // doorbell\n\
\tret;\n}\n\
.func (.param .b32 func_retval0) f(\n\t.param .b64 f_param_0\n)\n;\n\
.visible .entry b()\n{\n\tmembar.gl;\n\t{ // callseq\n\tcall.uni (retval0), f, (param0);\n\t}\n\tld.volatile.global.u8 %rs1, [%rd1];\n}\n\
.func (.param .b32 func_retval0) f(\n\t.param .b64 f_param_0\n)\n{\n\tatom.global.add.u64 %rd1, [%rd2], 1;\n\tret;\n}\n";
        let k = kernel_orderings(ptx);
        assert_eq!(k.len(), 2);
        assert_eq!(
            k[0].instructions,
            [
                "st.relaxed.sys.global.b32",
                "fence.release.gpu",
                "st.mmio.relaxed.sys.global.b64"
            ]
        );
        assert_eq!(
            k[1].instructions,
            ["membar.gl", "atom.global.add.u64", "ld.volatile.global.u8"]
        );
        assert!(!is_ordering("ld.global.nc.u32"));
        assert!(!is_ordering("st.global.v4.u32"));
    }

    #[test]
    fn numbers_are_left_out_of_registers_and_labels_only() {
        assert_eq!(
            without_numbers("add.s64 %rd12, %rd3, 64; @%p1 bra $L__BB3_7;"),
            "add.s64 %rd, %rd, 64; @%p bra $L__BB;"
        );
        assert_eq!(
            without_numbers("ld.param.u64 %rd1, [k_param_0+40];"),
            "ld.param.u64 %rd, [k_param_0+40];"
        );
    }

    /// A loop whose first check may succeed, a wait that reads the clock, a trap and a
    /// forward branch: the clock-free paths are the ones that skip the clock.
    #[test]
    fn clock_free_paths_are_the_simple_paths_that_read_no_clock() {
        let ptx = "\
.visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n\t.reg .pred %p<4>;\n\
\tld.param.u64 %rd1, [k_param_0];\n\
\tsetp.eq.s32 %p1, %r1, 0;\n\
\t@%p1 bra $L__BB0_2;\n\
\ttrap;\n\
$L__BB0_2:\n\
\tld.acquire.sys.global.b64 %rd2, [%rd1];\n\
\tsetp.lt.u64 %p2, %rd2, 8;\n\
\t@%p2 bra $L__BB0_4;\n\
\t// begin inline asm\n\
\tmov.u64 %rd3, %globaltimer;\n\
\t// end inline asm\n\
\tbra.uni $L__BB0_2;\n\
$L__BB0_4:\n\
\tst.global.u64 [%rd1], %rd2;\n\
\tret;\n\
}\n";
        let body = entry_body(ptx, "k").expect("entry k");
        assert_eq!(body[0], ".reg .pred %p<4>;");
        let paths = clock_free_paths(&body, 16).expect("paths");
        assert_eq!(
            paths,
            [[
                "ld.param.u64 %rd1, [k_param_0];",
                "setp.eq.s32 %p1, %r1, 0;",
                "@%p1 bra $L__BB0_2;",
                "ld.acquire.sys.global.b64 %rd2, [%rd1];",
                "setp.lt.u64 %p2, %rd2, 8;",
                "@%p2 bra $L__BB0_4;",
                "st.global.u64 [%rd1], %rd2;",
                "ret;"
            ]]
        );
        assert_eq!(clock_free_paths(&body, 0), None, "past the limit");
        let unknown = ["@%p1 bra $L__nowhere;".to_string(), "ret;".to_string()];
        assert_eq!(clock_free_paths(&unknown, 16), None);
        assert_eq!(entry_body(ptx, "missing"), None);
    }

    #[test]
    fn splits_documented_sequences() {
        let s = parse_sequence(
            "fence.release.gpu; dbrec: st.relaxed.sys.global.b32; fence.release.gpu; \
             db: st.mmio.relaxed.sys.global.b64; cq: ld.relaxed.sys.global.b64; fence.acquire.gpu",
        );
        assert_eq!(
            s.doorbell,
            [
                "fence.release.gpu",
                "st.relaxed.sys.global.b32",
                "fence.release.gpu",
                "st.mmio.relaxed.sys.global.b64"
            ]
        );
        assert_eq!(
            s.completion,
            ["ld.relaxed.sys.global.b64", "fence.acquire.gpu"]
        );
        for kind in ibgda::order::ScopeKind::ALL {
            let seq = ibgda::order::device_sequence(kind);
            let parsed = parse_sequence(seq);
            if kind == ibgda::order::ScopeKind::HostBarrier {
                assert!(parsed.doorbell.is_empty());
            } else {
                assert!(
                    !parsed.doorbell.is_empty() && !parsed.completion.is_empty(),
                    "{kind:?}"
                );
                assert!(
                    parsed
                        .doorbell
                        .iter()
                        .chain(&parsed.completion)
                        .all(|i| is_ordering(i)),
                    "{kind:?}"
                );
            }
        }
    }
}
