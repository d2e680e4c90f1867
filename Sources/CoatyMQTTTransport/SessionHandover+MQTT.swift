public import CoatyMQTT
public import CoatyCommunication
public import CoatyModel
public import Logging

extension SessionHandover {
    /// Hands over MQTT sessions of the members of a shared-subscription group (recorder groups).
    ///
    /// `template` is a member's own MQTT configuration (brokers, credentials, TLS, keep-alive):
    /// a resumed session connects under the gone member's client id
    /// (``CoatyConnection/clientId(identityId:)``) without a clean session and holds the
    /// acknowledgement of each message until it is handled; ending it connects once with a clean
    /// session under that client id.
    ///
    /// ```swift
    /// let handover = SessionHandover.mqtt(template: configuration, options: options, logger: logger)
    /// let recorder = CoatyRecorder(manager: manager, connection: connection, handover: handover)
    /// ```
    ///
    /// - Parameters:
    ///   - template: the member's MQTT configuration.
    ///   - registry: the object types the resumed manager decodes.
    ///   - options: the member's manager options (the group among them); the resumed manager
    ///     uses QoS 1 and does not announce an identity.
    ///   - logger: where the resumed connections log.
    /// - Returns: the handover.
    public static func mqtt(
        template: MQTTConfiguration,
        registry: CoatyObjectRegistry = CoatyObjectRegistry(),
        options: CommunicationManager.Options,
        logger: Logger = Logger(label: "coaty.handover", factory: { _ in SwiftLogNoOpLogHandler() })
    ) -> SessionHandover {
        SessionHandover(
            resume: { identityId in
                var configuration = template
                configuration.clientId = CoatyConnection.clientId(identityId: identityId)
                configuration.cleanSession = false
                configuration.holdsAcknowledgements = true
                var options = options
                options.announcesIdentity = false
                options.qos = .atLeastOnce
                return try CommunicationManager(
                    transport: MQTTTransport(configuration: configuration, logger: logger),
                    identity: Identity(objectId: identityId, name: "session handover"),
                    registry: registry,
                    options: options,
                    logger: logger
                )
            },
            end: { identityId in
                var configuration = template
                configuration.clientId = CoatyConnection.clientId(identityId: identityId)
                configuration.cleanSession = true
                configuration.holdsAcknowledgements = false
                configuration.will = nil
                let client = MQTTClient(configuration: configuration, logger: logger)
                try await client.connect()
                await client.disconnect()
            }
        )
    }
}
