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
