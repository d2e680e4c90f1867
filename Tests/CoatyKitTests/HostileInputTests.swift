import CoatyKit
import CoatyTesting
import Foundation
import Testing

/// Hostile payloads on a real mosquitto, between valid events: each is dropped and counted as an
/// invalid payload, the agent stays online, and every valid event around them is delivered, in order.
@Suite(
    "Hostile input over a real mosquitto",
    .serialized,
    .timeLimit(.minutes(2)),
    .enabled(if: MosquittoBroker.findExecutable() != nil || ProcessInfo.processInfo.environment["CI"] == "true")
)
struct HostileInputTests {
    @Test(
        "Deep nesting, invalid UTF-8, NaN and Infinity, truncated, non-object and oversized payloads are counted; valid events around them arrive"
    )
    func hostilePayloadsAreDroppedAndCounted() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let identity = Identity(name: "observer")
        let observer = try CommunicationManager(
            transport: MQTTTransport(
                configuration: try MQTTConfiguration(
                    url: broker.url,
                    clientId: CoatyConnection.clientId(identityId: identity.objectId)
                )
            ),
            identity: identity,
            registry: CoatyObjectRegistry([Lamp.self])
        )
        try await observer.start()
        let lamps = try observer.observeAdvertise(Lamp.self)
        await lamps.subscribed()

        let raw = MQTTClient(configuration: try MQTTConfiguration(url: broker.url, clientId: "hostile-publisher"))
        try await raw.connect()
        let topic = "coaty/3/-/ADV::com.example.Lamp/\(CoatyUUID())"
        func valid(_ i: Int) throws -> [UInt8] {
            let object = try JSONValueEncoder().encode(Lamp(name: "valid \(i)", isOn: i % 2 == 0))
            return JSONValue.object(["object": object]).serializedBytes()
        }
        let lamp = String(
            decoding: try JSONValueEncoder().encode(Lamp(name: "x", isOn: true)).serializedBytes(),
            as: UTF8.self
        )
        let openLamp = String(lamp.dropLast())
        let hostile: [(String, [UInt8])] = [
            (
                "nested 100 000 deep",
                Array(#"{"object":"#.utf8) + Array(repeating: UInt8(ascii: "["), count: 100_000)
                    + Array(repeating: UInt8(ascii: "]"), count: 100_000) + Array("}".utf8)
            ),
            (
                "invalid UTF-8",
                Array(#"{"object":"#.utf8) + Array(openLamp.utf8) + Array(#","note":""#.utf8)
                    + [0xC3, 0x28, 0xFF] + Array(#""}}"#.utf8)
            ),
            ("NaN literal", Array((#"{"object":"# + openLamp + #","level":NaN}}"#).utf8)),
            ("Infinity literal", Array((#"{"object":"# + openLamp + #","level":-Infinity}}"#).utf8)),
            ("truncated", Array((#"{"object":"# + openLamp).utf8)),
            ("not an object", Array("[1,2,3]".utf8)),
            ("object member not an object", Array(#"{"object":"lamp"}"#.utf8)),
            ("empty", []),
            (
                "50 MB, over the default size limit",
                Array((#"{"object":"# + openLamp + #","blob":""#).utf8)
                    + Array(repeating: UInt8(ascii: "x"), count: 50_000_000) + Array(#""}}"#.utf8)
            ),
            (
                "a million-element array",
                Array(#"{"object":["#.utf8)
                    + Array(repeating: Array("0,".utf8), count: 999_999).flatMap { $0 } + Array("0]}".utf8)
            ),
        ]
        for (i, (_, payload)) in hostile.enumerated() {
            try await raw.publish(topic, payload: try valid(i))
            try await raw.publish(topic, payload: payload)
        }
        try await raw.publish(topic, payload: try valid(hostile.count))
        // Topics that MQTT forbids in a PUBLISH are refused before they reach the broker, with an error
        // that names the topic; the connection stays up.
        for bad in ["coaty/3/-/ADV::com.example.Lamp/#", "coaty/+/x", "a\u{0}b", ""] {
            await #expect(throws: (any Error).self, "\(bad.debugDescription)") {
                try await raw.publish(bad, payload: try valid(0))
            }
        }

        var names: [String] = []
        for await event in lamps {
            names.append(event.object.name)
            if names.count == hostile.count + 1 { break }
        }
        #expect(names == (0...hostile.count).map { "valid \($0)" })
        // Every hostile payload was counted (they were routed before the last valid event).
        #expect(observer.statistics.invalidPayloads == hostile.count, "\(hostile.map(\.0))")
        #expect(observer.communicationState == .online)
        await raw.disconnect()
        await observer.stop()
    }

    /// Topics may be 65 535 bytes long, so an object type of 10 000 characters is valid input: it is
    /// observed and delivered intact (published twice, as a custom type is). One that does not fit
    /// in a topic is refused when published, with an error, and the agent goes on.
    @Test("An object type of 10 000 characters is delivered intact; one beyond the topic limit is refused")
    func longObjectTypes() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let observer = try CommunicationManager.mqtt(url: broker.url, identity: Identity(name: "observer"))
        let publisher = try CommunicationManager.mqtt(url: broker.url, identity: Identity(name: "publisher"))
        try await observer.start()
        try await publisher.start()
        let long = "com.example." + String(repeating: "x", count: 10_000 - 12)
        let byType = try observer.observeAdvertise(objectType: long)
        let byCoreType = try observer.observeAdvertise(coreType: .coatyObject)
        await byType.subscribed()
        await byCoreType.subscribed()
        func object(_ objectType: String, _ name: String) throws -> AnyCoatyObject {
            try CoatyObjectRegistry().decode(
                JSONValue.object([
                    "objectType": .string(objectType), "coreType": "CoatyObject",
                    "objectId": .string(CoatyUUID().uuidString), "name": .string(name),
                ])
            )
        }
        try await publisher.publishAdvertise(try object(long, "long"))
        let tooLong = "com.example." + String(repeating: "y", count: 70_000)
        await #expect(throws: (any Error).self) {
            try await publisher.publishAdvertise(try object(tooLong, "too long"))
        }
        try await publisher.publishAdvertise(try object("com.example.Short", "after"))
        var viaType: AdvertiseEvent<AnyCoatyObject>?
        for await event in byType {
            viaType = event
            break
        }
        #expect(viaType?.object.objectType == long && viaType?.object.name == "long")
        var names: [String] = []
        for await event in byCoreType {
            names.append(event.object.name)
            if event.object.name == "after" { break }
        }
        #expect(names == ["long", "after"])
        #expect(observer.statistics.invalidPayloads == 0)
        #expect(publisher.communicationState == .online && observer.communicationState == .online)
        await publisher.stop()
        await observer.stop()
    }

    @Test("A pathological Like pattern and 10 000 conditions are evaluated, not stuck")
    func pathologicalFilters() throws {
        let text = String(repeating: "a", count: 10_000)
        let objects: [JSONValue] = [["s": .string(text)], ["s": .string(text + "b")]]
        let like = ObjectFilter.where("s", .like(String(repeating: "%a", count: 30) + "%b"))
        #expect(ObjectMatcher.apply(like, to: objects) == [objects[1]])
        let many = ObjectFilter(
            conditions: .and((0..<10_000).map { ObjectFilterCondition("s", .notEquals(.string("x\($0)"))) })
        )
        #expect(ObjectMatcher.apply(many, to: objects) == objects)
    }
}
