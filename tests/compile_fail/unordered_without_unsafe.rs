// The unordered scope is only available through an unsafe constructor.
use ibgda::order::Unordered;

fn main() {
    let _scope = Unordered::new();
}
