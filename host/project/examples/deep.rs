fn main() {
    let kind = std::env::args().nth(1).unwrap();
    let n: usize = std::env::args().nth(2).unwrap().parse().unwrap();
    let mib: usize = std::env::args().nth(3).unwrap().parse().unwrap();
    let src = match kind.as_str() {
        "array" => format!("export default {}{};", "[".repeat(n), "]".repeat(n)),
        "binary" => format!("export default 1{};", "+1".repeat(n)),
        "unary" => format!("export default {}1;", "!".repeat(n)),
        "arrow" => format!("export default {}1;", "a=>".repeat(n)),
        "cond" => format!("export default {}1;", "a?1:".repeat(n)),
        "member" => format!("export default a{};", ".b".repeat(n)),
        "call" => format!("export default f{};", "()".repeat(n)),
        "paren" => format!("export default {}1{};", "(".repeat(n), ")".repeat(n)),
        _ => panic!(),
    };
    let tmp = std::env::temp_dir().join(format!("deep-{kind}-{n}"));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::write(tmp.join("jig.ts"), src).unwrap();
    let r = std::thread::Builder::new().stack_size(mib << 20).spawn(move || jig_project::capture(&tmp).map(|_| ())).unwrap().join().unwrap();
    println!("{kind} {n}: {:?}", r.map_err(|e| e.code));
}
