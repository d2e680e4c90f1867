public import CoatyCore
public import CoatyTesting

// What the communication and runtime tests share: an agent on the in-process broker, a custom
// object type, and waits without time limits of their own (the suites' apply).

/// A custom object type based on CoatyObject: published twice (core type and object type topic).
public struct Light: CoatyObject, Hashable {
    public static let objectType = "com.example.Light"
    public var objectId = CoatyUUID()
    public var name: String
    public var isOn: Bool

    /// A light.
    public init(objectId: CoatyUUID = CoatyUUID(), name: String, isOn: Bool) {
        self.objectId = objectId
        self.name = name
        self.isOn = isOn
    }
}

/// One agent on an in-process broker.
public struct TestAgent: Sendable {
    /// The agent's manager.
    public let manager: CommunicationManager
    /// Its transport.
    public let transport: InProcessTransport
    /// Its identity's id.
    public var id: CoatyUUID { manager.identity.objectId }
    /// Its MQTT client id.
    public var clientId: String { transport.clientId }

    /// An agent whose manager decodes ``Light``.
    public init(
        _ broker: InProcessBroker,
        name: String = "agent",
        namespace: String = "-",
        crossNamespacing: Bool = false,
        deferredLimit: Int = 1000,
        sharedSubscriptionGroup: String? = nil
    ) throws {
        let identity = Identity(name: name)
        transport = broker.makeTransport(clientId: CoatyConnection.clientId(identityId: identity.objectId))
        manager = try CommunicationManager(
            transport: transport,
            identity: identity,
            registry: CoatyObjectRegistry([Light.self]),
            options: .init(
                namespace: namespace,
                crossNamespacing: crossNamespacing,
                deferredPublicationLimit: deferredLimit,
                sharedSubscriptionGroup: sharedSubscriptionGroup
            )
        )
    }

    /// Topics this agent published, in order.
    public func publishedTopics(_ broker: InProcessBroker) -> [String] {
        broker.publications.filter { $0.clientId == clientId && !$0.isWill }.map(\.message.topic)
    }
}

/// Waits (without any time limit of its own: the suite's applies) until `condition` holds.
public func waitUntil(_ condition: () throws -> Bool) async rethrows {
    while try !condition() { try? await Task.sleep(for: .milliseconds(1)) }
}

/// Waits until the manager reports `state`.
public func awaitState(_ manager: CommunicationManager, _ wanted: CommunicationState) async {
    for await state in manager.communicationStates() where state == wanted { return }
}
