import CoatyCore
import CommunicationTestSupport
import CoatyTesting
import Testing

@Suite("Shared-subscription groups on the in-process broker", .timeLimit(.minutes(1)))
struct SharedSubscriptionTests {
    @Test("Members of a group each get a share of the events; an agent outside it gets all")
    func membersShareEvents() async throws {
        let broker = InProcessBroker()
        let members = try (0..<3).map { try TestAgent(broker, name: "member \($0)", sharedSubscriptionGroup: "g") }
        let outsider = try TestAgent(broker, name: "outsider")
        let publisher = try TestAgent(broker, name: "publisher")
        var observations: [EventObservation<AdvertiseEvent<Light>>] = []
        for member in members {
            let observation = try member.manager.observeAdvertise(Light.self)
            try await member.manager.start()
            await observation.subscribed()
            observations.append(observation)
            #expect(
                broker.subscriptions(ofClient: member.clientId).contains("$share/g/coaty/3/-/ADV::com.example.Light/+")
            )
        }
        let all = try outsider.manager.observeAdvertise(Light.self)
        try await outsider.manager.start()
        await all.subscribed()
        try await publisher.manager.start()
        let count = 30
        for i in 0..<count { try await publisher.manager.publishAdvertise(Light(name: "L\(i)", isOn: true)) }

        var outsiderNames: [String] = []
        for await event in all {
            outsiderNames.append(event.object.name)
            if outsiderNames.count == count { break }
        }
        var memberNames: [[String]] = []
        for observation in observations {
            var names: [String] = []
            for await event in observation {
                names.append(event.object.name)
                if names.count == count / 3 { break }
            }
            memberNames.append(names)
        }
        #expect(outsiderNames.count == count)
        #expect(Set(memberNames.flatMap { $0 }) == Set(outsiderNames), "each event went to one member")
        #expect(memberNames.flatMap { $0 }.count == count)
        for agent in members + [outsider, publisher] { await agent.manager.stop() }
    }

    @Test("A member's own requests get their responses: response topics are not shared")
    func responsesAreNotShared() async throws {
        let broker = InProcessBroker()
        let member = try TestAgent(broker, name: "member", sharedSubscriptionGroup: "g")
        let responder = try TestAgent(broker, name: "responder")
        try await member.manager.start()
        try await responder.manager.start()
        let resolve = try #require(try await member.manager.publishDiscover(.objectId(responder.id)).first())
        #expect(resolve.sourceId == responder.id)
        #expect(
            !broker.subscriptions(ofClient: member.clientId).contains { $0.contains("RSV") && $0.hasPrefix("$share") }
        )
        await member.manager.stop()
        await responder.manager.stop()
    }

    @Test("A group is refused on RabbitMQ, which has no shared subscriptions")
    func groupRefusedOnRabbitMQ() throws {
        let broker = InProcessBroker()
        let identity = Identity()
        var options = CommunicationManager.Options(sharedSubscriptionGroup: "recorders")
        options.brokerType = .rabbitMQ
        #expect(throws: CommunicationError.invalidTopic(.sharedSubscriptionsUnsupported(.rabbitMQ))) {
            _ = try CommunicationManager(
                transport: broker.makeTransport(clientId: CoatyConnection.clientId(identityId: identity.objectId)),
                identity: identity,
                options: options
            )
        }
    }

    @Test("An invalid group name is refused with a clear error", arguments: ["", "a/b", "a+", "#", "x\u{0}"])
    func invalidGroup(_ group: String) throws {
        let broker = InProcessBroker()
        #expect(throws: CommunicationError.invalidTopic(.invalidSharedSubscriptionGroup(group))) {
            _ = try TestAgent(broker, sharedSubscriptionGroup: group)
        }
    }
}
