//! trybuild cases of bounda\x27s macros live in `tests/ui`.
