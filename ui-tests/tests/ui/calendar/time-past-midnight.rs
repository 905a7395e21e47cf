fn main() {
    let _ = bounda::time!("25:00");
}
