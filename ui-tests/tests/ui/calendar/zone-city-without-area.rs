fn main() {
    let _ = bounda::zone!("Paris");
}
