fn main() {
    let _ = bounda::zone!("Mars/Olympus");
}
