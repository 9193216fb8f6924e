//! Writes `kernels/cuda/ibgda_layout.h` from the Rust types (see `ibgda_kernels::layout`).

use std::path::Path;

fn main() -> std::io::Result<()> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(ibgda_kernels::layout::LAYOUT_HEADER_PATH);
    std::fs::write(&path, ibgda_kernels::layout::layout_header())?;
    println!("wrote {}", path.display());
    Ok(())
}
