//! `pipetrace config validate`.
use std::path::Path;

pub fn valid(file: &Path) -> i32 {
    println!("{}: valid", file.display());
    0
}
