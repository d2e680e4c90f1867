// codec-benchmark: CoatyKit's JSON codec against Foundation's JSONDecoder/JSONEncoder.
//
// Run:  Benchmarks/run codec [--json] [--iterations N] [--rounds N] [--only SUBSTRING]
//       (or swift run -c release codec-benchmark …)
//
// Every scenario handles the same ~300-byte Advertise payload
// {"object":{…},"privateData":{…}} and reports thread CPU nanoseconds per payload (best of several
// rounds, so time descheduled on a shared machine does not count), Foundation's time for the
// equivalent work on a plain Codable struct in the same run, and the ratio.

import CoatyCore
import Foundation

// MARK: - Types

/// The custom object type, as an application declares it.
struct Light: CoatyObject, Hashable {
    static let objectType = "com.example.Light"
    var objectId = CoatyUUID()
    var name: String
    var parentObjectId: CoatyUUID?
    var isOn: Bool
    var luminance: Double
    var colorTemperature: Int
    var room: String
}

/// The same shapes as plain Codable structs for Foundation.
struct PlainLight: Codable {
    var objectType: String
    var coreType: String
    var objectId: UUID
    var name: String
    var parentObjectId: UUID?
    var isOn: Bool
    var luminance: Double
    var colorTemperature: Int
    var room: String
}

struct PlainPrivateData: Codable {
    var sender: String
    var sequence: Int
}

struct PlainAdvertise: Codable {
    var object: PlainLight
    var privateData: PlainPrivateData?
}

/// Our typed payload for the typed-decode and encode scenarios.
struct Advertise<Object: Codable>: Codable {
    var object: Object
    var privateData: JSONObject?
}

// MARK: - Payload

let payloadText = """
    {"object":{"objectType":"com.example.Light","coreType":"CoatyObject",\
    "objectId":"3b5b8c6e-1f0a-4c1e-9a6f-0c7d2e4b8a11","name":"Light 17",\
    "parentObjectId":"8f14e45f-ceea-467a-9f4e-3a2b1c0d9e22","isOn":true,"luminance":0.75,\
    "colorTemperature":2700,"room":"B7-4.12"},\
    "privateData":{"sender":"ui","sequence":123456}}
    """
let payload = Array(payloadText.utf8)
let payloadData = Data(payload)

// MARK: - Measurement

struct Options {
    var json = false
    var iterations = 20_000
    var rounds = 15
    var only: String?
}

var options = Options()
var arguments = CommandLine.arguments.dropFirst().makeIterator()
while let argument = arguments.next() {
    switch argument {
    case "--json": options.json = true
    case "--iterations": options.iterations = Int(arguments.next() ?? "") ?? options.iterations
    case "--rounds": options.rounds = Int(arguments.next() ?? "") ?? options.rounds
    case "--only": options.only = arguments.next()
    case "-h", "--help":
        print("usage: codec-benchmark [--json] [--iterations N] [--rounds N] [--only SUBSTRING]")
        exit(0)
    default:
        FileHandle.standardError.write(Data("unknown argument \(argument)\n".utf8))
        exit(2)
    }
}

/// Keeps results alive so the optimizer cannot drop the work.
@inline(never)
func consume<T>(_ value: T) -> Int {
    withUnsafeBytes(of: value) { $0.count }
}

/// The CPU time of the calling thread in nanoseconds: time spent descheduled (the machine is
/// shared) does not count.
func threadCPUNanoseconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) * 1e9 + Double(ts.tv_nsec)
}

/// CPU nanoseconds per call: the best of several rounds (least disturbed by other processes).
func measure(_ iterations: Int, rounds: Int, _ body: () throws -> Int) rethrows -> Double {
    var sink = 0
    for _ in 0..<min(iterations, 2_000) { sink &+= try body() }  // warm-up
    var best = Double.infinity
    for _ in 0..<rounds {
        let start = threadCPUNanoseconds()
        for _ in 0..<iterations { sink &+= try body() }
        best = min(best, (threadCPUNanoseconds() - start) / Double(iterations))
    }
    if sink == 42 { print("") }
    return best
}

struct Row {
    let name: String
    let ours: Double
    let baseline: Double?
}

@MainActor
func run() throws -> [Row] {
    let n = options.iterations
    let r = options.rounds
    let registered = CoatyObjectRegistry([Light.self])
    let coreOnly = CoatyObjectRegistry()
    let foundationDecoder = JSONDecoder()
    let foundationEncoder = JSONEncoder()
    let ourEncoder = JSONValueEncoder()
    let ourDecoder = JSONValueDecoder(registry: registered)

    // Sanity: every path understands the payload.
    let check = try registered.decode(try JSONValue(parsing: payload)["object"]!)
    precondition(check.value is Light)
    let coreView = try coreOnly.decode(try JSONValue(parsing: payload)["object"]!)
    precondition(coreView.as(BaseObject.self)?.custom.count == 4)
    let plain = try foundationDecoder.decode(PlainAdvertise.self, from: payloadData)
    let light = check.as(Light.self)!
    let privateData = try JSONValue(parsing: payload)["privateData"]!.objectValue!

    var rows: [Row] = []
    func wanted(_ name: String) -> Bool { options.only.map { name.contains($0) } ?? true }

    // Foundation baselines (skipped with --only unless it names "Foundation").
    let withBaselines = wanted("Foundation")
    let foundationDecode =
        withBaselines
        ? try measure(n, rounds: r) {
            consume(try foundationDecoder.decode(PlainAdvertise.self, from: payloadData))
        } : nil
    let foundationEncode =
        withBaselines
        ? try measure(n, rounds: r) {
            try foundationEncoder.encode(plain).count
        } : nil

    func scenario(_ name: String, baseline: Double?, _ body: () throws -> Int) throws {
        guard wanted(name) else { return }
        rows.append(Row(name: name, ours: try measure(n, rounds: r, body), baseline: baseline))
    }

    try scenario("parse payload bytes -> JSONValue", baseline: nil) {
        consume(try JSONValue(parsing: payload))
    }

    try scenario("decode Advertise -> registered Light (AnyCoatyObject)", baseline: foundationDecode) {
        let value = try JSONValue(parsing: payload)
        guard case .object(let top) = value, let object = top["object"] else { fatalError("bad payload") }
        let any = try registered.decode(object)
        return consume(any) &+ (top["privateData"]?.objectValue?.count ?? 0)
    }

    let payloadArray = Array(payload)
    try scenario("read Advertise payload bytes -> registered Light (agent's path)", baseline: foundationDecode) {
        let data = try AdvertiseEventData(bytes: payloadArray, registry: registered)
        return consume(data.object) &+ (data.privateData?.count ?? 0)
    }

    try scenario("decode Advertise -> core BaseObject + custom fields", baseline: foundationDecode) {
        let value = try JSONValue(parsing: payload)
        guard case .object(let top) = value, let object = top["object"] else { fatalError("bad payload") }
        let any = try coreOnly.decode(object)
        return consume(any) &+ (top["privateData"]?.objectValue?.count ?? 0)
    }

    try scenario("decode Advertise<Light> typed (no AnyCoatyObject)", baseline: foundationDecode) {
        consume(try ourDecoder.decode(Advertise<Light>.self, from: payload))
    }

    try scenario("encode Advertise<Light> -> bytes", baseline: foundationEncode) {
        try ourEncoder.encodeToBytes(Advertise(object: light, privateData: privateData)).count
    }

    try scenario("encode Light -> bytes, streamed (publish path)", baseline: nil) {
        try ourEncoder.encodeToBytes(light).count
    }

    try scenario("encode Light -> JSONValue tree -> bytes (for comparison)", baseline: nil) {
        try ourEncoder.encode(light).serializedBytes().count
    }

    let any = try AnyCoatyObject(light)
    try scenario("encode Advertise of AnyCoatyObject -> bytes", baseline: foundationEncode) {
        JSONValue.object(["object": .object(any.json), "privateData": .object(privateData)]).serializedBytes().count
    }

    let foundationUUID = withBaselines ? measure(n, rounds: r) { consume(UUID()) } : nil
    try scenario("new CoatyUUID() vs Foundation UUID()", baseline: foundationUUID) {
        consume(CoatyUUID())
    }

    return rows
}

let rows = try run()

if options.json {
    var results: [JSONValue] = []
    for row in rows {
        var entry: JSONObject = ["scenario": .string(row.name), "oursNs": .double((row.ours * 10).rounded() / 10)]
        if let baseline = row.baseline {
            entry["foundationNs"] = .double((baseline * 10).rounded() / 10)
            entry["ratio"] = .double((row.ours / baseline * 1000).rounded() / 1000)
        }
        results.append(.object(entry))
    }
    let document: JSONValue = [
        "benchmark": "codec",
        "payloadBytes": .int(Int64(payload.count)),
        "iterations": .int(Int64(options.iterations)),
        "rounds": .int(Int64(options.rounds)),
        "results": .array(results),
    ]
    print(document.serializedString())
} else {
    func pad(_ s: String, _ width: Int) -> String {
        s.count >= width ? s : s + String(repeating: " ", count: width - s.count)
    }
    func lpad(_ s: String, _ width: Int) -> String {
        s.count >= width ? s : String(repeating: " ", count: width - s.count) + s
    }
    func ns(_ d: Double) -> String { String(format: "%.0f", d) }
    print(
        "codec-benchmark: \(payload.count)-byte Advertise payload, CPU ns per payload, best of \(options.rounds) x \(options.iterations)"
    )
    print(pad("scenario", 56) + lpad("ours ns", 10) + lpad("Foundation ns", 15) + lpad("ratio", 8))
    for row in rows {
        let baseline = row.baseline.map(ns) ?? "-"
        let ratio = row.baseline.map { String(format: "%.2f", row.ours / $0) } ?? "-"
        print(pad(row.name, 56) + lpad(ns(row.ours), 10) + lpad(baseline, 15) + lpad(ratio, 8))
    }
    print("ratio = ours / Foundation (lower is better); Foundation decodes/encodes an equivalent plain Codable struct.")
}
