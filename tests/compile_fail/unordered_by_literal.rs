// Nor can it be made by naming its (private) field.
use ibgda::order::Unordered;

fn main() {
    let _scope = Unordered { _private: () };
}
