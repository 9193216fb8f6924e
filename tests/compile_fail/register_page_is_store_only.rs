//! A register page is written, never read or read-modify-written.
use ibgda::memory::RegisterPage;

fn inspect(page: &RegisterPage) {
    let mut bytes = [0u8; 8];
    page.read(0, &mut bytes).unwrap();
    let _ = page.word(0);
    let _ = page.to_vec();
}

fn main() {}
