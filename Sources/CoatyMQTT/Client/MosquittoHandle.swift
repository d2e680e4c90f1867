import CMosquittoShim
import CoatySync

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The version of the linked libmosquitto, e.g. `2000011` for 2.0.11 (major × 1 000 000 + minor × 1000 + revision).
public var libmosquittoVersion: Int { Int(CMosquittoShim_libraryVersion()) }

/// An event from the C shim, copied out of its C representation.
struct ShimEvent: Sendable {
    /// How soon after connecting a session the broker ends counts as brief (the shim's constant).
    static let briefSessionLimit = Duration.milliseconds(Int(CMosquittoShim_BriefSessionMilliseconds))

    enum Kind: Int32, Sendable {
        case connected = 1
        case connectionRefused = 2
        case connectFailed = 3
        case connectionLost = 4
        case published = 5
        case subscribed = 6
        case unsubscribed = 7
        case stopped = 8
        case drained = 9
    }

    var kind: Kind
    var code: Int32
    var mid: Int32
    /// ConnectionLost: the sessions in a row the broker ended within ``briefSessionLimit`` of connecting.
    var briefSessions: Int
    /// The index into `MQTTConfiguration.brokers` of the broker the loop was connecting or connected to.
    var broker: Int
    var detail: String
}

/// The thin Swift wrapper around one C shim client; the only place that touches its raw pointer.
///
/// `@unchecked Sendable`: this box carries a pointer across the C boundary. The C client guards all of its
/// state with its own mutexes (queue, control, acknowledgement and error locks) and libmosquitto's, so
/// calling it from any thread is safe; the pointer itself is immutable and released exactly once in `deinit`.
final class MosquittoHandle: @unchecked Sendable {
    private let pointer: OpaquePointer
    static let maximumBatch = 512

    init(configuration: MQTTConfiguration) throws {
        // libmosquitto refuses a keep-alive of 1…4 s or over 65535 s when connecting (MOSQ_ERR_INVAL), which
        // would otherwise surface as "cannot reach the broker".
        let keepAlive = configuration.keepAlive.components.seconds
        guard keepAlive == 0 || (5...65_535).contains(keepAlive), configuration.keepAlive >= .zero else {
            throw MQTTError(
                .invalidConfiguration,
                "Invalid MQTT keep-alive \(configuration.keepAlive): use 0 (off) or 5…65535 seconds"
                    + " (libmosquitto refuses shorter ones)."
            )
        }
        for fallback in configuration.fallbackBrokers {
            guard fallback.usesTLS == (configuration.tls != nil) else {
                throw MQTTError(
                    .invalidConfiguration,
                    "Invalid fallback broker \(fallback.url): every broker must use the scheme of \(configuration.url);"
                        + " mixing mqtt:// and mqtts:// is not supported."
                )
            }
            guard !fallback.host.isEmpty, (1...65_535).contains(fallback.port) else {
                throw MQTTError(
                    .invalidConfiguration,
                    "Invalid fallback broker \(fallback.url): give a host and a port 1…65535."
                )
            }
        }
        guard configuration.protocolVersion == .v311 || configuration.cleanSession else {
            // MQTT 5 ends a session at the disconnect unless CONNECT carries a session expiry interval, which
            // libmosquitto 2.0 cannot send on an asynchronous connect: a persistent session would silently not be one.
            throw MQTTError(
                .invalidConfiguration,
                "A persistent session (cleanSession false) needs MQTT 3.1.1 here: over MQTT 5 the broker would end it"
                    + " at every disconnect. Use protocolVersion .v311 for durable delivery."
            )
        }
        var arena = CStringArena()
        defer { arena.free() }
        var options = CMosquittoShim_Options()
        options.clientId = arena.copy(configuration.clientId)
        options.host = arena.copy(configuration.host)
        options.port = Int32(clamping: configuration.port)
        let fallbackHosts: [UnsafePointer<CChar>?] = configuration.fallbackBrokers.map { arena.copy($0.host) }
        let fallbackPorts = configuration.fallbackBrokers.map { Int32(clamping: $0.port) }
        options.fallbackCount = Int32(clamping: fallbackHosts.count)
        options.keepAliveSeconds = Int32(clamping: configuration.keepAlive.components.seconds)
        options.cleanSession = configuration.cleanSession
        options.protocolV5 = configuration.protocolVersion == .v5
        options.username = arena.copy(configuration.username)
        options.password = arena.copy(configuration.password)
        if let tls = configuration.tls {
            options.useTLS = true
            options.caFile = arena.copy(tls.caFile)
            options.certificateFile = arena.copy(tls.certificateFile)
            options.privateKeyFile = arena.copy(tls.privateKeyFile)
            options.verifyServer = tls.verifyServer
        }
        if let will = configuration.will {
            options.hasWill = true
            options.willTopic = arena.copy(will.topic)
            options.willPayload = UnsafeRawPointer(arena.copy(bytes: will.payload))
            options.willPayloadLength = Int32(clamping: will.payload.count)
            options.willQoS = Int32(will.qos.rawValue)
            options.willRetain = will.retain
        }
        options.connectTimeoutMilliseconds = Self.milliseconds(configuration.connectTimeout)
        options.reconnectDelayMilliseconds = Self.milliseconds(configuration.reconnectDelay)
        options.maxReconnectDelayMilliseconds = Self.milliseconds(configuration.maxReconnectDelay)
        options.messageCapacity = Int32(clamping: max(1, configuration.messageBufferCapacity))
        options.stopFlushMilliseconds = max(0, Self.milliseconds(configuration.disconnectFlushTimeout))
        options.tcpNoDelay = configuration.tcpNoDelay
        options.holdAcknowledgements = configuration.holdsAcknowledgements

        var code: Int32 = 0
        var text = [CChar](repeating: 0, count: 256)
        let created = fallbackHosts.withUnsafeBufferPointer { hosts in
            fallbackPorts.withUnsafeBufferPointer { ports in
                options.fallbackHosts = hosts.baseAddress
                options.fallbackPorts = ports.baseAddress
                return text.withUnsafeMutableBufferPointer { buffer in
                    CMosquittoShim_Client_create(&options, &code, buffer.baseAddress, buffer.count)
                }
            }
        }
        guard let created else {
            let message = text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            throw MQTTError(
                .invalidConfiguration,
                "Cannot set up the MQTT client for \(configuration.url): \(message)"
                    + " (check the TLS file paths and the will topic)."
            )
        }
        pointer = created
    }

    deinit {
        CMosquittoShim_Client_stop(pointer)
        CMosquittoShim_Client_closeDispatcher(pointer)
        CMosquittoShim_Client_release(pointer)
    }

    private static func milliseconds(_ duration: Duration) -> Int32 {
        let (seconds, attoseconds) = duration.components
        return Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000)
    }

    /// Makes the next network loop call `session.dispatchRound()` between its steps, on its thread, and
    /// `session.loopEnded()` once at its end; the loop keeps `session` alive until then. Call before `start()`; when
    /// `start()` fails, hand the session back with `discardDispatch(_:)`.
    func setDispatch(_ session: SessionDispatch) -> Unmanaged<SessionDispatch> {
        let retained = Unmanaged.passRetained(session)
        CMosquittoShim_Client_setDispatch(
            pointer,
            { context, final in
                guard let context else { return }
                let session = Unmanaged<SessionDispatch>.fromOpaque(context)
                if final {
                    session.takeRetainedValue().loopEnded()
                } else {
                    session.takeUnretainedValue().dispatchRound()
                }
            },
            retained.toOpaque()
        )
        return retained
    }

    /// Releases the session passed to `setDispatch(_:)` when no loop started with it.
    func discardDispatch(_ retained: Unmanaged<SessionDispatch>) {
        CMosquittoShim_Client_setDispatch(pointer, nil, nil)
        retained.release()
    }

    /// Starts the network loop thread; returns a MOSQ_ERR_* code.
    func start() -> Int32 { CMosquittoShim_Client_start(pointer) }

    /// Asks the network loop to flush, disconnect and end (non-blocking).
    func stop() { CMosquittoShim_Client_stop(pointer) }

    func openDispatcher() { CMosquittoShim_Client_openDispatcher(pointer) }

    func closeDispatcher() { CMosquittoShim_Client_closeDispatcher(pointer) }

    /// What the dispatch round has to do (never blocks); returns the reasons' mask.
    func dispatchReasons() -> Int32 { CMosquittoShim_Client_dispatchReasons(pointer) }

    /// Asks the network loop thread for a dispatch round soon.
    func wakeDispatcher() { CMosquittoShim_Client_wakeDispatcher(pointer) }

    func popEvent() -> ShimEvent? {
        CMosquittoShim_Client_popEvent(pointer).flatMap(Self.take)
    }

    /// The oldest event once every message received before it has been taken (see
    /// `CMosquittoShim_Client_popDueEvent`), or `nil`; `stopped` only when `includeStopped`.
    func popDueEvent(includeStopped: Bool) -> ShimEvent? {
        CMosquittoShim_Client_popDueEvent(pointer, includeStopped).flatMap(Self.take)
    }

    /// Converts and frees a taken event.
    private static func take(_ event: UnsafeMutablePointer<CMosquittoShim_Event>) -> ShimEvent? {
        defer { CMosquittoShim_Event_free(event) }
        let detail = withUnsafeBytes(of: &event.pointee.detail) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        guard let kind = ShimEvent.Kind(rawValue: event.pointee.kind) else { return nil }
        return ShimEvent(
            kind: kind,
            code: event.pointee.code,
            mid: event.pointee.mid,
            briefSessions: Int(event.pointee.briefSessions),
            broker: Int(event.pointee.broker),
            detail: detail
        )
    }

    var droppedCount: UInt64 { CMosquittoShim_Client_droppedCount(pointer) }

    /// Network-thread events lost to a failed allocation (each also ended the session).
    var eventsLostCount: UInt64 { CMosquittoShim_Client_eventsLostCount(pointer) }

    /// Tests only: makes the next `count` event allocations of the shim fail.
    func failEventAllocations(_ count: Int) { CMosquittoShim_Client_failEventAllocations(pointer, Int32(count)) }

    /// Releases the held acknowledgements through message number `through` (durable delivery).
    func acknowledge(through: UInt64) { CMosquittoShim_Client_acknowledgeThrough(pointer, through) }

    /// Reads nothing more from the broker until the next start (see `CMosquittoShim_Client_closeIntake`); returns the
    /// loop step through which a read may still be under way.
    func closeIntake() -> UInt64 { CMosquittoShim_Client_closeIntake(pointer) }

    /// Whether the loop ended `step` (from ``closeIntake()``): nothing more is read.
    func intakeSettled(_ step: UInt64) -> Bool { CMosquittoShim_Client_intakeSettled(pointer, step) }

    /// The number of the last message whose acknowledgement is held, or 0.
    var acknowledgementDue: UInt64 { CMosquittoShim_Client_acknowledgementDue(pointer) }

    /// Holds or resumes the loop's reads (back-pressure from the consumer side).
    func setReadPaused(_ paused: Bool) { CMosquittoShim_Client_setReadPaused(pointer, paused) }

    /// Whether the loop held its reads in its last step.
    var readingHeld: Bool { CMosquittoShim_Client_readingHeld(pointer) }

    /// QoS 0 publications queued but never written (lost with a connection, or at the disconnect flush deadline).
    var unsentCount: UInt64 { CMosquittoShim_Client_unsentCount(pointer) }

    /// QoS 0 publishes written by the publishing thread itself (the shim's direct path; never over TLS).
    var directPublishCount: UInt64 { CMosquittoShim_Client_directPublishCount(pointer) }

    /// QoS 0 publishes queued but not yet written to the socket.
    var outstandingPublishes: UInt64 { CMosquittoShim_Client_outstandingPublishes(pointer) }

    /// Arms one `drained` event for when at most `target` QoS 0 publications are unwritten; `true` when that is
    /// already so.
    func armDrain(_ target: UInt64) -> Bool { CMosquittoShim_Client_armDrain(pointer, target) }

    /// Whether a `drained` event fired since the last call.
    func takeDrained() -> Bool { CMosquittoShim_Client_takeDrained(pointer) }

    func discardMessages() { CMosquittoShim_Client_discardMessages(pointer) }

    /// Takes up to `maximumBatch` queued messages, converting each into an ``MQTTMessage`` and freeing the C copy.
    /// When none is queued and `arm` is set, the dispatch round after the next message serves the waiting consumer.
    func takeMessages(arm: Bool) -> [MQTTMessage] {
        take { CMosquittoShim_Client_takeMessages(pointer, $0.baseAddress, $0.count, arm) }
    }

    /// Like `takeMessages(arm: false)`, but first blocks the calling thread up to `microseconds` while none is queued.
    func takeMessages(waitingMicroseconds microseconds: Int32) -> [MQTTMessage] {
        take { CMosquittoShim_Client_takeMessagesWaiting(pointer, $0.baseAddress, $0.count, microseconds) }
    }

    private func take(
        _ body: (UnsafeMutableBufferPointer<UnsafeMutablePointer<CMosquittoShim_Message>?>) -> Int
    ) -> [MQTTMessage] {
        withUnsafeTemporaryAllocation(
            of: UnsafeMutablePointer<CMosquittoShim_Message>?.self,
            capacity: Self.maximumBatch
        ) { buffer in
            let count = body(buffer)
            guard count > 0 else { return [] }
            var messages = [MQTTMessage]()
            messages.reserveCapacity(count)
            for index in 0..<count {
                guard let message = buffer[index] else { continue }
                let header = message.pointee
                let topic = String(
                    decoding: UnsafeBufferPointer(
                        start: CMosquittoShim_Message_topic(message),
                        count: Int(header.topicLength)
                    ),
                    as: UTF8.self
                )
                let payload = [UInt8](
                    UnsafeBufferPointer(
                        start: CMosquittoShim_Message_payload(message),
                        count: Int(header.payloadLength)
                    )
                )
                messages.append(
                    MQTTMessage(
                        topic: topic,
                        payload: payload,
                        qos: MQTTQoS(rawValue: UInt8(truncatingIfNeeded: header.qos)) ?? .atMostOnce,
                        retain: header.retain != 0,
                        userProperties: header.userPropertiesLength == 0
                            ? []
                            : Self.userProperties(
                                UnsafeRawBufferPointer(
                                    start: CMosquittoShim_Message_userProperties(message),
                                    count: Int(header.userPropertiesLength)
                                )
                            )
                    )
                )
                CMosquittoShim_Message_free(message)
            }
            return messages
        }
    }

    /// The user properties the shim wrote after a message's payload (see `CMosquittoShim_Message`).
    static func userProperties(_ bytes: UnsafeRawBufferPointer) -> [MQTTUserProperty] {
        var properties: [MQTTUserProperty] = []
        var offset = 0
        func string() -> String? {
            guard offset + 2 <= bytes.count else { return nil }
            let length = Int(bytes.loadUnaligned(fromByteOffset: offset, as: UInt16.self))
            guard offset + 2 + length <= bytes.count else { return nil }
            defer { offset += 2 + length }
            return String(decoding: bytes[(offset + 2)..<(offset + 2 + length)], as: UTF8.self)
        }
        while let name = string(), let value = string() {
            properties.append(MQTTUserProperty(name: name, value: value))
        }
        return properties
    }

    /// Publishes; returns the MOSQ_ERR_* code and the message id. User properties go out only over MQTT 5 (the shim
    /// refuses them over MQTT 3.1.1, so the caller passes none there).
    func publish(
        topic: String,
        payload: UnsafeRawBufferPointer,
        qos: MQTTQoS,
        retain: Bool,
        userProperties: [MQTTUserProperty] = []
    ) -> (Int32, Int32) {
        var mid: Int32 = 0
        guard userProperties.isEmpty else {
            var arena = CStringArena()
            defer { arena.free() }
            let names: [UnsafePointer<CChar>?] = userProperties.map { arena.copy($0.name) }
            let values: [UnsafePointer<CChar>?] = userProperties.map { arena.copy($0.value) }
            let rc = topic.withCString { topicPointer in
                CMosquittoShim_Client_publishWithUserProperties(
                    pointer,
                    &mid,
                    topicPointer,
                    payload.baseAddress,
                    Int32(payload.count),
                    Int32(qos.rawValue),
                    retain,
                    names,
                    values,
                    Int32(clamping: userProperties.count)
                )
            }
            return (rc, mid)
        }
        let rc = topic.withCString { topicPointer in
            CMosquittoShim_Client_publish(
                pointer,
                &mid,
                topicPointer,
                payload.baseAddress,
                Int32(payload.count),
                Int32(qos.rawValue),
                retain
            )
        }
        return (rc, mid)
    }

    /// Subscribes to filters with one QoS in one SUBSCRIBE packet; returns the MOSQ_ERR_* code and the message id.
    func subscribe(_ filters: [String], qos: MQTTQoS) -> (Int32, Int32) {
        var arena = CStringArena()
        defer { arena.free() }
        let pointers: [UnsafePointer<CChar>?] = filters.map { arena.copy($0) }
        var mid: Int32 = 0
        let rc = pointers.withUnsafeBufferPointer { buffer in
            CMosquittoShim_Client_subscribe(
                pointer,
                &mid,
                buffer.baseAddress,
                Int32(buffer.count),
                Int32(qos.rawValue)
            )
        }
        return (rc, mid)
    }

    /// Unsubscribes from one filter; returns the MOSQ_ERR_* code and the message id.
    func unsubscribe(_ filter: String) -> (Int32, Int32) {
        var mid: Int32 = 0
        let rc = filter.withCString { CMosquittoShim_Client_unsubscribe(pointer, &mid, $0) }
        return (rc, mid)
    }

    static func errorString(_ code: Int32) -> String { String(cString: CMosquittoShim_errorString(code)) }

    static func reasonString(_ code: Int32, v5: Bool) -> String {
        String(cString: CMosquittoShim_reasonString(code, v5))
    }
}

/// libmosquitto error codes the Swift side interprets (values from mosquitto.h).
enum MosquittoCode {
    static let success: Int32 = 0
    static let noMemory: Int32 = 1
    static let protocolError: Int32 = 2
    static let invalid: Int32 = 3
    static let noConnection: Int32 = 4
    static let connectionRefused: Int32 = 5
    static let connectionLost: Int32 = 7
    static let tls: Int32 = 8
    static let payloadSize: Int32 = 9
    static let authentication: Int32 = 11
    static let errno: Int32 = 14
    static let keepalive: Int32 = 19
    static let oversizePacket: Int32 = 25
    static let addressInfo: Int32 = 15
    static let lookup: Int32 = 20
    static let tlsHandshake: Int32 = 23
    static let timeout: Int32 = -1000
}
