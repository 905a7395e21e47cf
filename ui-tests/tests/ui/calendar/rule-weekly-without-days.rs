fn main() {
    let _ = bounda::rule!("FREQ=WEEKLY;BYHOUR=8");
}
