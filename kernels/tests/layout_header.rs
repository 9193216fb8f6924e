//! The committed `cuda/ibgda_layout.h` must equal what the Rust types generate.
//! Regenerate with `IBGDA_BLESS=1 cargo test -p ibgda-kernels --test layout_header`.

use std::path::Path;

use ibgda_kernels::layout::{layout_header, LAYOUT_HEADER_PATH};

#[test]
fn committed_layout_header_matches_the_rust_types() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(LAYOUT_HEADER_PATH);
    let generated = layout_header();
    if std::env::var("IBGDA_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &generated).expect("write the layout header");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != generated {
        let first = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(generated.lines().count()));
        panic!(
            "{} is out of date with the Rust layouts (first difference at line {}:\n  \
             committed: {:?}\n  generated: {:?}).\nRegenerate it with:\n  \
             IBGDA_BLESS=1 cargo test -p ibgda-kernels --test layout_header\n\
             or: cargo run -p ibgda-kernels --bin ibgda-layout-header",
            path.display(),
            first + 1,
            committed.lines().nth(first).unwrap_or("<end of file>"),
            generated.lines().nth(first).unwrap_or("<end of file>"),
        );
    }
}
