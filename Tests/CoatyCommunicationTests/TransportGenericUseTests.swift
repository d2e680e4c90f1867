import CoatyCore
import CoatyTesting
import Testing

/// A miniature dispatcher written only against `CoatyTransport`, as the communication manager is:
/// it takes what the transport pushes, classifies every received topic and stops after `count`
/// messages.
func dispatch<Transport: CoatyTransport>(
    _ transport: Transport,
    count: Int
) async -> (coaty: [CommunicationEventType], raw: [String], invalid: [CoatyTopicError]) {
    var coaty: [CommunicationEventType] = []
    var raw: [String] = []
    var invalid: [CoatyTopicError] = []
    var seen = 0
    let (messages, continuation) = AsyncStream.makeStream(of: TransportMessage.self)
    transport.deliverMessages { batch in
        for message in batch { continuation.yield(message) }
    }
    for await message in messages {
        switch CoatyTopic.classify(message.topic) {
        case .coaty(let topic): coaty.append(topic.eventType)
        case .raw: raw.append(message.topic)
        case .invalid(let error): invalid.append(error)
        }
        seen += 1
        if seen == count { break }
    }
    return (coaty, raw, invalid)
}

/// Waits for the `connected` state through the protocol's state sequence.
func awaitConnected<Transport: CoatyTransport>(_ transport: Transport) async -> Bool {
    for await state in transport.connectionStates() where state == .connected {
        return true
    }
    return false
}

@Suite("CoatyTransport used generically")
struct TransportGenericUseTests {
    @Test("a dispatcher over `any CoatyTransport` sees Coaty, Raw and invalid topics in order")
    func dispatcherOverExistential() async throws {
        let broker = InProcessBroker()
        let transport: any CoatyTransport = broker.makeTransport(clientId: "agent")
        let identity = CoatyUUID()
        try await transport.connect(will: try CoatyConnection.lastWill(namespace: "-", identityId: identity))
        #expect(await awaitConnected(transport))
        try await transport.subscribe("#")

        let advertise = try CoatyTopic(event: .advertise(.coreType(.identity)), namespace: "-", sourceId: identity)
        try await transport.publish(topic: advertise.name, payload: Array("{}".utf8))
        try await transport.publish(topic: "sensors/1", payload: [1])
        broker.publish(TransportMessage(topic: "coaty/3/-/DSC/\(identity)", payload: []))
        let discover = try CoatyTopic(
            event: .discover,
            namespace: "-",
            sourceId: identity,
            correlationId: CoatyUUID()
        )
        try await transport.publish(topic: discover.name, payload: Array("{}".utf8))

        let result = await dispatch(transport, count: 4)
        #expect(result.coaty == [.advertise, .discover])
        #expect(result.raw == ["sensors/1"])
        #expect(result.invalid == [.missingCorrelationId(.discover)])
    }
}
