fn main() {
    let _ = bounda::rule!("FREQ=HOURLY;BYMINUTE=0");
}
