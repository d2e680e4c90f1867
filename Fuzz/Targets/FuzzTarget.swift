@_spi(Fuzzing) import CoatyCore

/// The parsers that face the network and the operator, each with a property that must hold for
/// every input (a violated property is a crash, which libFuzzer reports with the input).
///
/// Built with `-sanitize=fuzzer,address` into `coaty-fuzz` (see `Fuzz/run`); the test suite runs
/// every committed corpus file (`Fuzz/Corpus/<target>/`) through the same code, so every crash
/// found becomes a regression test by committing its input there.
public enum FuzzTarget: String, CaseIterable, Sendable {
    /// `JSONValue(parsing:)`: a parsed value serializes to text that parses back to it.
    case json
    /// `CoatyTopic(parsing:)`: a parsed topic's name parses back to the same topic.
    case topic
    /// ObjectFilter decoding: a decoded filter matches sample objects (bounded time, as its `Like`
    /// patterns must be) and survives an encode/decode round trip with the same answers.
    case objectFilter = "object-filter"
    /// Received payloads (first byte: the event type): the manager's reading (objects straight
    /// from the text) and the reference reading (a parsed tree) agree — same JSON or same error.
    case eventPayload = "event-payload"
    /// `AgentConfiguration(json:)`: any JSON reads to a configuration or a clear error.
    case configuration

    /// The target `COATY_FUZZ_TARGET` names (libFuzzer runs one entry point per binary).
    public static var selected: FuzzTarget {
        guard let name = getenv("COATY_FUZZ_TARGET").map({ String(cString: $0) }),
            let target = FuzzTarget(rawValue: name)
        else {
            fatalError("Set COATY_FUZZ_TARGET to one of: \(allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return target
    }

    /// Runs one input; a violated property stops the process with a message (for libFuzzer).
    /// - Parameter bytes: the input.
    public func run(_ bytes: [UInt8]) {
        if let violation = check(bytes) { fatalError("fuzz property violated (\(rawValue)): \(violation)") }
    }

    /// Runs one input through the target.
    /// - Parameter bytes: the input.
    /// - Returns: the violated property, or `nil` when every property held.
    public func check(_ bytes: [UInt8]) -> String? {
        do throws(Violation) {
            switch self {
            case .json: try Self.json(bytes)
            case .topic: try Self.topic(bytes)
            case .objectFilter: try Self.objectFilter(bytes)
            case .eventPayload: try Self.eventPayload(bytes)
            case .configuration: _ = try? AgentConfiguration(json: JSONValue(parsing: bytes))
            }
            return nil
        } catch {
            return error.message
        }
    }

    private struct Violation: Error {
        let message: String
    }

    private static func check(_ holds: Bool, _ message: @autoclosure () -> String) throws(Violation) {
        if !holds { throw Violation(message: message()) }
    }

    private static func json(_ bytes: [UInt8]) throws(Violation) {
        guard let value = try? JSONValue(parsing: bytes) else { return }
        let text = value.serializedBytes()
        guard let again = try? JSONValue(parsing: text) else {
            return try check(false, "the serialized text does not parse: \(String(decoding: text, as: UTF8.self))")
        }
        try check(again == value, "the text parses to another value: \(String(decoding: text, as: UTF8.self))")
        try check(again.serializedBytes() == text, "serializing is not stable")
    }

    private static func topic(_ bytes: [UInt8]) throws(Violation) {
        guard let topic = try? CoatyTopic(parsing: String(decoding: bytes, as: UTF8.self)) else { return }
        guard let again = try? CoatyTopic(parsing: topic.name) else {
            return try check(false, "the topic's name does not parse: \(topic.name)")
        }
        try check(again.name == topic.name && again.eventType == topic.eventType, "the name parses to another topic")
    }

    /// Objects with every kind of member value a filter compares.
    private static let samples: [JSONValue] = [
        ["name": "alpha", "n": 10, "x": 2.5, "s": "10", "b": true, "tags": ["a", 1], "o": ["k": "v"]],
        ["name": "Beta", "n": -1, "s": "beta", "b": false, "missing": nil, "tags": []],
        ["name": "", "n": 1e20, "s": "ä", "o": ["k": ["deep": [1, 2]]]],
        ["objectType": "t.A", "coreType": "CoatyObject", "name": "x y", "n": 9_007_199_254_740_993],
    ]

    private static func objectFilter(_ bytes: [UInt8]) throws(Violation) {
        guard let json = try? JSONValue(parsing: bytes),
            let filter = try? JSONValueDecoder().decode(ObjectFilter.self, from: json)
        else { return }
        let answer = ObjectMatcher.apply(filter, to: samples)
        guard let encoded = try? JSONValueEncoder().encode(filter),
            let decoded = try? JSONValueDecoder().decode(ObjectFilter.self, from: encoded)
        else { return try check(false, "a decoded filter does not round-trip: \(json)") }
        try check(
            ObjectMatcher.apply(decoded, to: samples) == answer,
            "the round-tripped filter answers otherwise: \(json)"
        )
    }

    private static let registry = CoatyObjectRegistry()

    private static func eventPayload(_ bytes: [UInt8]) throws(Violation) {
        guard let first = bytes.first else { return }
        let types = CommunicationEventType.allCases
        let eventType = types[Int(first) % types.count]
        let payload = Array(bytes.dropFirst())
        let (received, tree) = ReceivedPayloadReading.read(eventType, payload, registry: registry)
        switch (received, tree) {
        case (nil, nil):
            return
        case (.success(let a)?, .success(let b)?):
            try check(a == b, "\(eventType): the readings differ")
            try check(
                JSONValue.object(a).serializedBytes() == JSONValue.object(b).serializedBytes(),
                "\(eventType): the readings differ in member order or number forms"
            )
        case (.failure(let a)?, .failure(let b)?):
            try check(a.description == b.description, "\(eventType): the errors differ: \(a) / \(b)")
        default:
            try check(false, "\(eventType): one reading failed, the other did not: \(String(describing: received))")
        }
    }
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
