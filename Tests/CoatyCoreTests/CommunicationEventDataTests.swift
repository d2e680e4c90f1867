import CoatyCore
import Testing

private let registry = CoatyObjectRegistry()
private let taskJSON =
    #"{"objectType":"coaty.Task","coreType":"Task","objectId":"3d3e5c7a-1b2c-4d5e-8f90-a1b2c3d4e5f6","name":"t","status":0,"creatorId":"3d3e5c7a-1b2c-4d5e-8f90-a1b2c3d4e5f7","creationTimestamp":1}"#

private func parse(_ text: String) throws -> JSONObject {
    try #require(try JSONValue(parsing: text).objectValue)
}

@Suite("Communication event payloads")
struct CommunicationEventDataTests {
    @Test(
        "Discover: the valid forms are accepted, the others dropped",
        arguments: [
            (#"{"objectId":"3d3e5c7a-1b2c-4d5e-8f90-a1b2c3d4e5f6"}"#, true),
            (#"{"externalId":"x"}"#, true),
            (#"{"externalId":"x","objectTypes":["a.B"]}"#, true),
            (#"{"externalId":"x","coreTypes":["Task"],"objectTypes":["a.B"]}"#, true),
            (#"{"externalId":"x","objectId":"3d3e5c7a-1b2c-4d5e-8f90-a1b2c3d4e5f6"}"#, true),
            (#"{"coreTypes":["Identity"]}"#, true),
            (#"{"objectTypes":["a.B"]}"#, true),
            (#"{}"#, false),
            (#"{"coreTypes":["Task"],"objectTypes":["a.B"]}"#, false),
            (#"{"objectId":"3d3e5c7a-1b2c-4d5e-8f90-a1b2c3d4e5f6","coreTypes":["Task"]}"#, false),
            (#"{"externalId":"x","objectId":"3d3e5c7a-1b2c-4d5e-8f90-a1b2c3d4e5f6","coreTypes":["Task"]}"#, false),
            (#"{"coreTypes":["NoSuchType"]}"#, false),
            (#"{"objectId":"not-a-uuid"}"#, false),
            (#"{"objectTypes":"a.B"}"#, false),
        ]
    )
    func discoverForms(json: String, valid: Bool) throws {
        let object = try parse(json)
        let result = Result { () throws(CommunicationEventDataError) in
            try DiscoverEventData(json: object, registry: registry)
        }
        switch result {
        case .success(let data):
            #expect(valid)
            #expect(data.json == object)
        case .failure(let error):
            #expect(!valid)
            #expect(error.eventType == .discover)
        }
    }

    @Test("Discover constructors build valid forms; the throwing init rejects invalid ones")
    func discoverConstructors() throws {
        #expect(DiscoverEventData.coreTypes([.identity]).json == ["coreTypes": ["Identity"]])
        #expect(DiscoverEventData.externalId("e").json == ["externalId": "e"])
        #expect(throws: CommunicationEventDataError.self) { try DiscoverEventData() }
        #expect(throws: CommunicationEventDataError.self) {
            try DiscoverEventData(objectTypes: ["a.B"], coreTypes: [.task])
        }
    }

    @Test("Discover matching follows ids and types")
    func discoverMatching() throws {
        let task = try registry.decode(bytes: Array(taskJSON.utf8))
        #expect(DiscoverEventData.coreTypes([.task]).matches(task))
        #expect(!DiscoverEventData.coreTypes([.identity]).matches(task))
        #expect(DiscoverEventData.objectTypes(["coaty.Task"]).matches(task))
        #expect(DiscoverEventData.objectId(task.objectId).matches(task))
        #expect(!DiscoverEventData.objectId(CoatyUUID()).matches(task))
        #expect(!DiscoverEventData.externalId("x").matches(task))
    }

    @Test("Advertise: privateData omitted when absent, kept when present; invalid objects rejected")
    func advertise() throws {
        let object = try parse(#"{"object":\#(taskJSON)}"#)
        let data = try AdvertiseEventData(json: object, registry: registry)
        #expect(data.privateData == nil)
        #expect(data.json == object)
        #expect(!String(decoding: data.payloadBytes, as: UTF8.self).contains("privateData"))
        let withPrivate = try parse(#"{"object":\#(taskJSON),"privateData":{"a":1}}"#)
        #expect(try AdvertiseEventData(json: withPrivate, registry: registry).privateData == ["a": 1])
        #expect(throws: CommunicationEventDataError.self) {
            try AdvertiseEventData(json: try parse(#"{"object":{"objectType":"x"}}"#), registry: registry)
        }
        #expect(throws: CommunicationEventDataError.self) {
            try AdvertiseEventData(json: try parse(#"{}"#), registry: registry)
        }
        #expect(throws: CommunicationEventDataError.self) {
            try AdvertiseEventData(bytes: Array("not json".utf8), registry: registry)
        }
    }

    @Test("Channel: exactly one of object and objects, wire form kept")
    func channel() throws {
        let single = try parse(#"{"object":\#(taskJSON)}"#)
        let many = try parse(#"{"objects":[\#(taskJSON),\#(taskJSON)]}"#)
        #expect(try ChannelEventData(json: single, registry: registry).json == single)
        #expect(try ChannelEventData(json: many, registry: registry).objects.count == 2)
        #expect(try ChannelEventData(json: many, registry: registry).json == many)
        #expect(throws: CommunicationEventDataError.self) {
            try ChannelEventData(json: try parse(#"{"object":\#(taskJSON),"objects":[]}"#), registry: registry)
        }
        #expect(throws: CommunicationEventDataError.self) {
            try ChannelEventData(json: try parse(#"{}"#), registry: registry)
        }
    }

    @Test("Deadvertise: empty list valid, ids must be UUIDs")
    func deadvertise() throws {
        #expect(try DeadvertiseEventData(json: try parse(#"{"objectIds":[]}"#), registry: registry).objectIds.isEmpty)
        let id = CoatyUUID()
        #expect(DeadvertiseEventData(objectIds: [id]).json == ["objectIds": [.string(id.uuidString)]])
        #expect(throws: CommunicationEventDataError.self) {
            try DeadvertiseEventData(json: try parse(#"{"objectIds":["x"]}"#), registry: registry)
        }
        #expect(throws: CommunicationEventDataError.self) {
            try DeadvertiseEventData(json: try parse(#"{}"#), registry: registry)
        }
    }

    @Test("Resolve: at least one of object and relatedObjects")
    func resolve() throws {
        #expect(throws: CommunicationEventDataError.self) {
            try ResolveEventData(json: try parse(#"{"privateData":{}}"#), registry: registry)
        }
        let related = try parse(#"{"relatedObjects":[\#(taskJSON)]}"#)
        let data = try ResolveEventData(json: related, registry: registry)
        #expect(data.object == nil)
        #expect(data.json == related)
    }

    @Test("Query: exactly one of objectTypes and coreTypes; join conditions as one or array")
    func query() throws {
        let single = try parse(
            #"{"coreTypes":["Task"],"objectFilter":{"conditions":["name",[7,"t"]]},"objectJoinConditions":{"localProperty":"a","asProperty":"b"}}"#
        )
        let data = try QueryEventData(json: single, registry: registry)
        #expect(data.objectJoinConditions?.isSingleObject == true)
        #expect(data.json == single)
        let array = try parse(
            #"{"objectTypes":["a.B"],"objectJoinConditions":[{"localProperty":"a","asProperty":"b"}]}"#
        )
        #expect(try QueryEventData(json: array, registry: registry).json == array)
        #expect(throws: CommunicationEventDataError.self) {
            try QueryEventData(json: try parse(#"{"objectTypes":["a.B"],"coreTypes":["Task"]}"#), registry: registry)
        }
        #expect(throws: CommunicationEventDataError.self) {
            try QueryEventData(json: try parse(#"{}"#), registry: registry)
        }
        let task = try registry.decode(bytes: Array(taskJSON.utf8))
        #expect(data.matches(task))
        #expect(!QueryEventData(coreTypes: [.task], objectFilter: .where("name", .equals("other"))).matches(task))
    }

    @Test("Retrieve, Update, Complete round trip")
    func retrieveUpdateComplete() throws {
        let retrieve = try parse(#"{"objects":[]}"#)
        #expect(try RetrieveEventData(json: retrieve, registry: registry).json == retrieve)
        #expect(throws: CommunicationEventDataError.self) { try RetrieveEventData(json: [:], registry: registry) }
        let update = try parse(#"{"object":\#(taskJSON)}"#)
        #expect(try UpdateEventData(json: update, registry: registry).json == update)
        let complete = try parse(#"{"object":\#(taskJSON),"privateData":{"x":true}}"#)
        #expect(try CompleteEventData(json: complete, registry: registry).json == complete)
    }

    @Test("Call: parameters must be an array or an object; filter decoded")
    func call() throws {
        let byName = try parse(#"{"parameters":{"a":1},"filter":{"conditions":["floor",[7,3]]}}"#)
        let data = try CallEventData(json: byName, registry: registry)
        #expect(data.parameter("a") == 1)
        #expect(data.filter != nil)
        #expect(data.json == byName)
        let byPosition = try CallEventData(json: try parse(#"{"parameters":[1,"x"]}"#), registry: registry)
        #expect(byPosition.parameter(at: 1) == "x")
        #expect(byPosition.parameter(at: 2) == nil)
        #expect(try CallEventData(json: [:], registry: registry).json.isEmpty)
        #expect(throws: CommunicationEventDataError.self) {
            try CallEventData(json: try parse(#"{"parameters":3}"#), registry: registry)
        }
    }

    @Test(
        "Return: exactly one of result (null allowed) and error",
        arguments: [
            (#"{"result":null}"#, true),
            (#"{"result":{"a":1},"executionInfo":{"t":2}}"#, true),
            (#"{"error":{"code":-32602,"message":"Invalid params"}}"#, true),
            (#"{}"#, false),
            (#"{"result":1,"error":{"code":1,"message":"m"}}"#, false),
            (#"{"error":{"code":"x","message":"m"}}"#, false),
            (#"{"error":{"code":1}}"#, false),
        ]
    )
    func returnForms(json: String, valid: Bool) throws {
        let object = try parse(json)
        let result = Result { () throws(CommunicationEventDataError) in
            try ReturnEventData(json: object, registry: registry)
        }
        switch result {
        case .success(let data):
            #expect(valid)
            #expect(data.json == object)
        case .failure:
            #expect(!valid)
        }
    }

    @Test("Return: result null is kept on the wire; the predefined error")
    func returnNull() throws {
        #expect(ReturnEventData(result: .null).json == ["result": .null])
        #expect(String(decoding: ReturnEventData(result: .null).payloadBytes, as: UTF8.self) == #"{"result":null}"#)
        let error = ReturnEventData(error: .invalidParameters)
        #expect(error.error == ReturnError(code: -32602, message: "Invalid params"))
        #expect(error.result == nil)
    }

    @Test("Codable through the fast codec gives the wire form")
    func codable() throws {
        let discover = DiscoverEventData.coreTypes([.task, .identity])
        let encoded = try JSONValueEncoder().encode(discover)
        #expect(encoded == ["coreTypes": ["Task", "Identity"]])
        let decoded = try JSONValueDecoder(registry: registry).decode(DiscoverEventData.self, from: encoded)
        #expect(decoded == discover)
        let advertise = try JSONValueDecoder(registry: registry)
            .decode(AdvertiseEventData.self, from: Array(#"{"object":\#(taskJSON)}"#.utf8))
        #expect(advertise.object.coreType == .task)
    }

    @Test("Associate: ids required, route optional (disassociate), updateRate a number")
    func associate() throws {
        let source = CoatyUUID()
        let actor = CoatyUUID()
        let full = try parse(
            #"{"ioSourceId":"\#(source)","ioActorId":"\#(actor)","associatingRoute":"coaty/3/-/IOV/\#(source)","updateRate":250}"#
        )
        let data = try AssociateEventData(json: full, registry: registry)
        #expect(data.updateRate == 250)
        #expect(data.json == full)
        let disassociate = try AssociateEventData(
            json: try parse(#"{"ioSourceId":"\#(source)","ioActorId":"\#(actor)"}"#),
            registry: registry
        )
        #expect(disassociate.isDisassociation)
        #expect(AssociateEventData(ioSourceId: source, ioActorId: actor, updateRate: 0.5).json["updateRate"] == 0.5)
        #expect(throws: CommunicationEventDataError.self) {
            try AssociateEventData(json: try parse(#"{"ioSourceId":"\#(source)"}"#), registry: registry)
        }
        #expect(throws: CommunicationEventDataError.self) {
            try AssociateEventData(
                json: try parse(#"{"ioSourceId":"\#(source)","ioActorId":"\#(actor)","updateRate":"fast"}"#),
                registry: registry
            )
        }
    }
}
