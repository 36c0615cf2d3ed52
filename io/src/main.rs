fn main() {
    println!("switchboard: not built yet");
}
