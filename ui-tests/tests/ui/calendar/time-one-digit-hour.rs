fn main() {
    let _ = bounda::time!("9:00");
}
