fn main() {
    let name = "Europe/Paris";
    let _ = bounda::zone!(name);
}
