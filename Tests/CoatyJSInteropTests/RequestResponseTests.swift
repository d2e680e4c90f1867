import CoatyKit
import Foundation
import Testing

extension CoatyJSInterop {
    /// Discover→Resolve, Query→Retrieve, Update→Complete and Call→Return between CoatyKit and the
    /// real Coaty JS 2.4.1: each side once the requester and once the responder.
    @Suite("Requests and responses with Coaty JS")
    struct RequestResponseTests {
        /// Runs `body` with a CoatyKit agent and a Coaty JS `respond` peer holding the sample lamps
        /// and the room, answering Calls of `interop.switch` in context `{"floor":3}`.
        private func withCoatyJSResponder(
            _ body: (CommunicationManager, CoatyJSAgent, CoatyUUID) async throws -> Void
        ) async throws {
            try await withBroker { broker in
                try await withAgent(on: broker, registry: interopRegistry()) { agent in
                    let objects: [any CoatyObject] = sampleLamps + [sampleRoom]
                    let respond = [
                        "--objects", try jsonArgument(objects), "--operation", "interop.switch", "--context",
                        #"{"floor":3}"#,
                    ]
                    try await withCoatyJS("respond", respond, on: broker, timeout: 20) { peer in
                        try await body(agent, peer, try await peer.identityId())
                    }
                }
            }
        }

        // MARK: Discover → Resolve

        @Test(
            "CoatyKit → Coaty JS: Discover by objectId, externalId (alone and with core types), object types; Coaty JS's identity"
        )
        func discoverCoatyJS() async throws {
            try await withCoatyJSResponder { agent, peer, jsId in
                let lamps = sampleLamps
                let byId = try #require(
                    try await agent.publishDiscover(.objectId(lamps[2].objectId)).first(timeout: .seconds(5))
                )
                #expect(byId.sourceId == jsId)
                #expect(byId.data.object?.as(Lamp.self) == lamps[2])
                #expect(byId.data.relatedObjects == nil)

                let byExternal = try #require(
                    try await agent.publishDiscover(.externalId("ext-hall")).first(timeout: .seconds(5))
                )
                #expect(byExternal.data.object?.as(Lamp.self) == lamps[1])

                let byExternalAndCore = try #require(
                    try await agent.publishDiscover(.externalId("ext-kitchen", coreTypes: [.coatyObject]))
                        .first(timeout: .seconds(5))
                )
                #expect(byExternalAndCore.data.object?.as(Lamp.self) == lamps[0])

                let byType = try await agent.publishDiscover(.objectTypes([Lamp.objectType]))
                    .responses(limit: lamps.count, timeout: .seconds(5)).collect()
                #expect(byType.count == lamps.count, "one Resolve per lamp")
                #expect(Set(byType.compactMap { $0.data.object?.as(Lamp.self) }) == Set(lamps))

                // Coaty JS's built-in responder answers a Discover of its identity.
                let identity = try #require(
                    try await agent.publishDiscover(.objectId(jsId)).first(timeout: .seconds(5))
                )
                #expect(identity.data.object?.coreType == .identity)
                #expect(identity.data.object?.objectType == "coaty.Identity")
                #expect(identity.data.object?.name == "coaty-js respond")

                // What the Coaty JS app was given is what CoatyKit sent.
                let discovers = try await peer.wait(for: "Discover", count: 5)
                #expect(discovers[0].at("data.objectId") == .string(lamps[2].objectId.uuidString))
                #expect(discovers[1].at("data.externalId") == "ext-hall")
                #expect(discovers[1].at("data.objectTypes") == nil)
                #expect(discovers[2].at("data.externalId") == "ext-kitchen")
                #expect(discovers[2].at("data.coreTypes") == ["CoatyObject"])
                #expect(discovers[3].at("data.objectTypes") == [.string(Lamp.objectType)])
                #expect(discovers.allSatisfy { $0["sourceId"] == .string(agent.identity.objectId.uuidString) })
            }
        }

        @Test(
            "Coaty JS → CoatyKit: Discover by objectId, externalId with object types, object types; CoatyKit's identity"
        )
        func discoverCoatyKit() async throws {
            try await withBroker { broker in
                try await withAgent(on: broker, name: "kit responder", registry: interopRegistry()) { agent in
                    let lamps = sampleLamps
                    let objects = try lamps.map { try AnyCoatyObject($0) }
                    let discovers = try agent.observeDiscover()
                    await discovers.subscribed()
                    let responder = Task {
                        for await discover in discovers {
                            for object in objects where discover.data.matches(object) {
                                try? await discover.resolve(object: object, privateData: ["responder": "CoatyKit"])
                            }
                        }
                    }
                    defer { responder.cancel() }

                    async let byId = runCoatyJS(
                        "discover",
                        ["--object-id", lamps[3].objectId.uuidString, "--count", "1"],
                        on: broker
                    )
                    async let byExternal = runCoatyJS(
                        "discover",
                        ["--external-id", "ext-kitchen", "--object-types", Lamp.objectType, "--count", "1"],
                        on: broker
                    )
                    async let byType = runCoatyJS(
                        "discover",
                        ["--object-types", Lamp.objectType, "--count", "\(lamps.count)"],
                        on: broker
                    )
                    async let identity = runCoatyJS(
                        "discover",
                        ["--object-id", agent.identity.objectId.uuidString, "--count", "1"],
                        on: broker
                    )
                    let kitId = JSONValue.string(agent.identity.objectId.uuidString)

                    let idResolve = try #require(try await byId.events("Resolve").first)
                    #expect(idResolve["sourceId"] == kitId)
                    #expect(idResolve.at("data.object") == lamps[3].json)
                    #expect(idResolve.at("data.privateData") == ["responder": "CoatyKit"])

                    let externalResolve = try #require(try await byExternal.events("Resolve").first)
                    #expect(externalResolve.at("data.object") == lamps[0].json)

                    let typeResolves = try await byType.events("Resolve")
                    #expect(typeResolves.count == lamps.count)
                    #expect(Set(typeResolves.compactMap { $0.at("data.object") }) == Set(lamps.map(\.json)))

                    let identityResolve = try #require(try await identity.events("Resolve").first)
                    #expect(identityResolve.at("data.object.objectId") == kitId)
                    #expect(identityResolve.at("data.object.name") == "kit responder")
                    #expect(identityResolve.at("data.object.coreType") == "Identity")
                    #expect(identityResolve.at("data.object.objectType") == "coaty.Identity")
                }
            }
        }

        // MARK: Query → Retrieve

        @Test(
            "CoatyKit → Coaty JS: Query with conditions, orderBy, skip/take and a join; without a filter; by core type"
        )
        func queryCoatyJS() async throws {
            try await withCoatyJSResponder { agent, peer, jsId in
                let lamps = sampleLamps
                let filter = ObjectFilter.where("brightness", .greaterThanOrEqual(30)).and("name", .like("Lamp%"))
                    .orderBy("brightness", .descending).skip(1).take(2)
                let join = ObjectJoinConditionList([
                    ObjectJoinCondition(localProperty: "roomId", asProperty: "room", isOneToOneRelation: true)
                ])
                let query = QueryEventData(
                    objectTypes: [Lamp.objectType],
                    objectFilter: filter,
                    objectJoinConditions: join
                )
                let retrieve = try #require(try await agent.publishQuery(query).first(timeout: .seconds(5)))
                #expect(retrieve.sourceId == jsId)
                let names = retrieve.data.objects.map(\.name)
                #expect(
                    names == ["Lamp desk", "Lamp porch"],
                    "brightness ≥ 30, name like Lamp%, brightness desc, skip 1, take 2"
                )
                #expect(retrieve.data.objects.compactMap { $0.as(Lamp.self) } == [lamps[2], lamps[3]])
                // CoatyKit's own evaluation of the filter agrees with Coaty JS's.
                let local = ObjectMatcher.apply(filter, to: lamps.map(\.json))
                #expect(retrieve.data.objects.map(\.jsonValue) == local)

                // Coaty JS received the filter and the join conditions as sent.
                let queryLine = try await peer.first("Query")
                #expect(queryLine.at("data.objectFilter") == query.json["objectFilter"])
                #expect(queryLine.at("data.objectJoinConditions") == query.json["objectJoinConditions"])
                #expect(queryLine.at("data.objectTypes") == [.string(Lamp.objectType)])

                // Without a filter every lamp is retrieved (Coaty JS 2.4.1 drops a Query without `objectFilter`).
                let all = try #require(
                    try await agent.publishQuery(QueryEventData(objectTypes: [Lamp.objectType])).first(
                        timeout: .seconds(5)
                    ),
                    "Coaty JS answers a Query that CoatyKit sends without a filter"
                )
                #expect(Set(all.data.objects.compactMap { $0.as(Lamp.self) }) == Set(lamps))

                // By core type: the room and every lamp are CoatyObjects; the filter keeps the one lamp that is off.
                let off = try #require(
                    try await agent.publishQuery(
                        QueryEventData(coreTypes: [.coatyObject], objectFilter: .where("isOn", .equals(false)))
                    ).first(timeout: .seconds(5))
                )
                #expect(off.data.objects.compactMap { $0.as(Lamp.self) } == [lamps[1]])
                #expect(try peer.events("coaty-error").isEmpty, "Coaty JS rejected nothing")
            }
        }

        @Test("Coaty JS → CoatyKit: Query with and-conditions, orderBy, skip/take and a one-to-one join")
        func queryCoatyKit() async throws {
            try await withBroker { broker in
                try await withAgent(on: broker, registry: interopRegistry()) { agent in
                    let lamps = sampleLamps
                    let registry = interopRegistry()
                    let candidates = lamps.map(\.json) + [try AnyCoatyObject(sampleRoom).jsonValue]
                    let queries = try agent.observeQuery()
                    await queries.subscribed()
                    let responder = Task {
                        for await query in queries {
                            let typed = candidates.filter { candidate in
                                guard let object = try? registry.decode(candidate) else { return false }
                                return query.data.matchesType(of: object)
                            }
                            var result = ObjectMatcher.apply(query.data.objectFilter, to: typed)
                            if let joins = query.data.objectJoinConditions {
                                result = ObjectMatcher.resolveJoins(
                                    joins.conditions,
                                    in: result,
                                    candidates: candidates
                                )
                            }
                            let objects: [any CoatyObject] = result.compactMap { try? registry.decode($0) }
                            try? await query.retrieve(objects: objects)
                        }
                    }
                    defer { responder.cancel() }

                    let filter = #"""
                        {"conditions":{"and":[["isOn",[7,true]],["brightness",[4,20,90]]]},\#
                        "orderByProperties":[["name","Asc"]],"skip":1,"take":2}
                        """#
                    let join = #"[{"localProperty":"roomId","asProperty":"room","isOneToOneRelation":true}]"#
                    let peer = try await runCoatyJS(
                        "query",
                        ["--object-types", Lamp.objectType, "--filter", filter, "--join", join, "--count", "1"],
                        on: broker
                    )
                    let retrieve = try #require(try peer.events("Retrieve").first)
                    #expect(retrieve["sourceId"] == .string(agent.identity.objectId.uuidString))
                    let objects = try #require(retrieve.at("data.objects")?.arrayValue)
                    // isOn and brightness 20…90: desk, kitchen, porch by name; skip 1, take 2.
                    #expect(objects.compactMap { $0["name"]?.stringValue } == ["Lamp kitchen", "Lamp porch"])
                    #expect(objects.map(\.objectIdValue) == [lamps[0].objectId, lamps[3].objectId])
                    #expect(objects.first?["room"] == (try AnyCoatyObject(sampleRoom).jsonValue), "the room is joined")
                    #expect(
                        objects.last?.objectValue?.index(forKey: "room") == nil,
                        "one-to-one without a room: left out"
                    )
                    #expect(objects.first?["brightness"] == 80)
                }
            }
        }

        // MARK: Update → Complete

        @Test("CoatyKit → Coaty JS: Update of a custom object is completed with Coaty JS's change")
        func updateCoatyJS() async throws {
            try await withCoatyJSResponder { agent, peer, jsId in
                var lamp = sampleLamps[0]
                lamp.brightness = 12
                lamp.isOn = false
                let complete = try #require(try await agent.publishUpdate(lamp).first(timeout: .seconds(5)))
                #expect(complete.sourceId == jsId)
                #expect(complete.data.object.as(Lamp.self) == lamp)
                #expect(complete.data.object.json["completedBy"] == "coaty-js")
                let update = try await peer.first("Update")
                #expect(update.at("data.object") == lamp.json)
                #expect(update["sourceId"] == .string(agent.identity.objectId.uuidString))
            }
        }

        @Test("Coaty JS → CoatyKit: Update answered by a CoatyKit responder with its changed object")
        func updateCoatyKit() async throws {
            try await withBroker { broker in
                try await withAgent(on: broker, registry: interopRegistry()) { agent in
                    let updates = try agent.observeUpdate(Lamp.self)
                    await updates.subscribed()
                    let responder = Task {
                        for await update in updates {
                            var changed = update.object
                            changed.name += " (completed by CoatyKit)"
                            changed.brightness += 1
                            try? await update.complete(object: changed, privateData: ["by": "CoatyKit"])
                        }
                    }
                    defer { responder.cancel() }

                    let lamp = sampleLamps[3]
                    let peer = try await runCoatyJS(
                        "update",
                        ["--object", jsonText(lamp.json), "--count", "1"],
                        on: broker
                    )
                    let complete = try #require(try peer.events("Complete").first)
                    #expect(complete["sourceId"] == .string(agent.identity.objectId.uuidString))
                    var expected = lamp
                    expected.name = "Lamp porch (completed by CoatyKit)"
                    expected.brightness = 31
                    #expect(complete.at("data.object") == expected.json)
                    #expect(complete.at("data.privateData") == ["by": "CoatyKit"])
                }
            }
        }

        // MARK: Call → Return

        @Test("CoatyKit → Coaty JS: Call with result, with the error form, positional parameters, a context filter")
        func callCoatyJS() async throws {
            try await withCoatyJSResponder { agent, peer, jsId in
                let onThird = ContextFilter.where("floor", .equals(3))
                let result = try #require(
                    try await agent.publishCall(
                        "interop.switch",
                        data: CallEventData(parameters: ["on": true, "level": 3], filter: onThird)
                    ).first(timeout: .seconds(5))
                )
                #expect(result.sourceId == jsId)
                #expect(result.data.result == ["operation": "interop.switch", "parameters": ["on": true, "level": 3]])
                #expect(result.data.error == nil)
                #expect(result.data.executionInfo == ["responder": "coaty-js"])

                let failed = try #require(
                    try await agent.publishCall(
                        "interop.switch",
                        data: CallEventData(parameters: ["fail": true], filter: onThird)
                    )
                    .first(timeout: .seconds(5))
                )
                #expect(failed.data.error == ReturnError(code: -32602, message: "Invalid params"))
                #expect(failed.data.error == .invalidParameters)
                #expect(failed.data.result == nil)
                #expect(failed.data.executionInfo == ["responder": "coaty-js"])

                let positional = try #require(
                    try await agent.publishCall(
                        "interop.switch",
                        data: CallEventData(positionalParameters: [1, "two"], filter: onThird)
                    ).first(timeout: .seconds(5))
                )
                #expect(positional.data.result?["parameters"] == [1, "two"])

                // Coaty JS's responder is in context {"floor":3}: neither a call for floor 4 nor one
                // without a context filter is for it.
                async let elsewhere = agent.publishCall(
                    "interop.switch",
                    data: CallEventData(parameters: ["on": false], filter: .where("floor", .equals(4)))
                ).first(timeout: .seconds(1))
                async let unfiltered = agent.publishCall(
                    "interop.switch",
                    data: CallEventData(parameters: ["on": false])
                )
                .first(timeout: .seconds(1))
                #expect(try await elsewhere == nil)
                #expect(try await unfiltered == nil)

                let calls = try await peer.wait(for: "Call", count: 3)
                #expect(calls.allSatisfy { $0["operation"] == "interop.switch" })
                #expect(calls[0].at("data.parameters") == ["on": true, "level": 3])
                #expect(calls.allSatisfy { $0.at("data.filter") == ["conditions": ["floor", [7, 3]]] })
                #expect(calls[1].at("data.parameters") == ["fail": true])
                #expect(calls[2].at("data.parameters") == [1, "two"])
                #expect(try peer.events("Call").count == 3, "the calls not for floor 3 did not reach the Coaty JS app")
            }
        }

        @Test("Coaty JS → CoatyKit: Call answered by a CoatyKit responder with a result and with the error form")
        func callCoatyKit() async throws {
            try await withBroker { broker in
                try await withAgent(on: broker) { agent in
                    let calls = try agent.observeCall(operation: "interop.add", context: ["floor": 3])
                    await calls.subscribed()
                    let responder = Task {
                        for await call in calls {
                            let info: JSONValue = ["responder": "CoatyKit"]
                            if call.data.parameter("fail") == true {
                                try? await call.returnError(.invalidParameters, executionInfo: info)
                            } else if let a = call.data.parameter("a")?.intValue,
                                let b = call.data.parameter("b")?.intValue
                            {
                                try? await call.returnResult(["sum": .int(Int64(a + b))], executionInfo: info)
                            } else {
                                try? await call.returnError(
                                    code: -32000,
                                    message: "a and b must be integers",
                                    executionInfo: info
                                )
                            }
                        }
                    }
                    defer { responder.cancel() }

                    let onThird = #"{"conditions":["floor",[7,3]]}"#
                    async let sum = runCoatyJS(
                        "call",
                        [
                            "--operation", "interop.add", "--params", #"{"a":2,"b":40}"#, "--context-filter", onThird,
                            "--count", "1",
                        ],
                        on: broker
                    )
                    async let failing = runCoatyJS(
                        "call",
                        [
                            "--operation", "interop.add", "--params", #"{"fail":true}"#, "--context-filter", onThird,
                            "--count", "1",
                        ],
                        on: broker
                    )
                    async let elsewhere = runCoatyJS(
                        "call",
                        [
                            "--operation", "interop.add", "--params", #"{"a":1,"b":1}"#, "--context-filter",
                            #"{"conditions":["floor",[7,4]]}"#,
                        ],
                        on: broker,
                        timeout: 1.5
                    )
                    let kitId = JSONValue.string(agent.identity.objectId.uuidString)

                    let result = try #require(try await sum.events("Return").first)
                    #expect(result["sourceId"] == kitId)
                    #expect(result.at("data.result") == ["sum": 42])
                    #expect(result.at("data.error") == nil)
                    #expect(result.at("data.executionInfo") == ["responder": "CoatyKit"])

                    let error = try #require(try await failing.events("Return").first)
                    #expect(error.at("data.error") == ["code": -32602, "message": "Invalid params"])
                    #expect(error.at("data.result") == nil)
                    #expect(error.at("data.executionInfo") == ["responder": "CoatyKit"])

                    let unanswered = try await elsewhere
                    #expect(try unanswered.events("Return").isEmpty, "CoatyKit's responder is in context floor 3")
                    #expect(try unanswered.events("done").first?["reason"] == "timeout")
                }
            }
        }
    }
}
