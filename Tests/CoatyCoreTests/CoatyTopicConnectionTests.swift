import CoatyCore
import Testing

@Suite("Coaty connection facts: client id and last will")
struct CoatyTopicConnectionTests {
    @Test("the client id is Coaty plus 18 hex digits of the identity id")
    func clientId() throws {
        let identity = try #require(CoatyUUID("0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"))
        let clientId = CoatyConnection.clientId(identityId: identity)
        #expect(clientId == "Coaty0a1b2c3d4e5f4a6b8c")
        #expect(clientId.utf8.count == 23)
        #expect(CoatyConnection.clientId(identityId: CoatyUUID()) != CoatyConnection.clientId(identityId: CoatyUUID()))
    }

    @Test("the last will deadvertises the identity and its owned objects")
    func lastWill() throws {
        let identity = try #require(CoatyUUID("0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"))
        let node = try #require(CoatyUUID("d2c1b0a9-8f7e-4d6c-b5a4-93827160f5e4"))
        let will = try CoatyConnection.lastWill(namespace: "-", identityId: identity, ownedObjectIds: [node])
        #expect(will.topic == "coaty/3/-/DAD/0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d")
        #expect(
            String(decoding: will.payload, as: UTF8.self)
                == #"{"objectIds":["0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d","d2c1b0a9-8f7e-4d6c-b5a4-93827160f5e4"]}"#
        )
        #expect(will.qos == .atMostOnce)
        #expect(!will.retain)
        let parsed = try CoatyTopic(parsing: will.topic)
        #expect(parsed.eventType == .deadvertise)
        #expect(parsed.sourceUUID == identity)

        let alone = try CoatyConnection.lastWill(namespace: "ns", identityId: identity)
        #expect(String(decoding: alone.payload, as: UTF8.self) == #"{"objectIds":["\#(identity)"]}"#)
        #expect(throws: CoatyTopicError.invalidNamespace("")) {
            try CoatyConnection.lastWill(namespace: "", identityId: identity)
        }
    }
}
