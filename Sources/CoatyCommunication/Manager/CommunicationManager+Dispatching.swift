import CoatyFilter
import CoatyModel
import CoatySync
import Logging
import Metrics
import ServiceLifecycle
import Synchronization

extension CommunicationManager {
    // MARK: Dispatching

    /// Routes a batch of received messages, then wakes the observers that got events, once each.
    func handle(_ batch: some Sequence<TransportMessage>) {
        for message in batch { handle(message) }
        wakeups.flush()
    }

    func handle(_ message: TransportMessage) {
        if options.deliversCopyPerSubscription, isExtraCopy(message) { return }
        switch classify(message.topic) {
        case .raw:
            metrics.received(.raw)
            let sinks = state.withLock { state in
                state.rawRoutes.values.filter {
                    MQTTTopicFilter.matches(
                        topic: message.topic,
                        filter: options.brokerType.deliveredForm(ofFilter: $0.filter)
                    )
                }
            }
            guard !sinks.isEmpty else { return }
            let event = RawEvent(topic: message.topic, payload: message.payload, retain: message.retain)
            for route in sinks { route.sink(event) }
        case .invalid(let error):
            counters.invalidTopic()
            logger.debug("Dropped a message on an invalid Coaty topic", metadata: ["error": "\(error)"])
            if !options.brokerType.rewritesDotsInTopics, !rewrittenTopicWarned.load(ordering: .relaxed),
                CoatyTopic.restoringRewrittenDots(message.topic) != nil,
                rewrittenTopicWarned.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged
            {
                logger.warning(
                    "Dropped a Coaty topic whose dots the broker rewrote as '/' (RabbitMQ's MQTT plugin does); set the broker type to rabbitmq (--broker-type rabbitmq, communication.brokerType, COATY_BROKER_TYPE or CommunicationManager.Options.brokerType) to read such topics",
                    metadata: ["topic": "\(message.topic.prefix(200))"]
                )
            }
        case .coaty(let topic):
            if !options.crossNamespacing, topic.namespace != options.namespace { return }
            metrics.received(topic.eventType)
            if topic.eventType.isResponse {
                guard let correlationId = topic.correlationUUID,
                    let sink = state.withLock({ $0.responseRoutes[correlationId] })
                else { return }
                guard let payload = decode(message.payload, topic: topic) else { return }
                sink(IncomingEvent(topic: topic, payload: payload, userProperties: message.userProperties))
            } else {
                let sinks = state.withLock { state in state.routes[topic.eventLevel]?.sinks }
                guard let sinks, !sinks.isEmpty else { return }
                guard let payload = decode(message.payload, topic: topic) else { return }
                let event = IncomingEvent(topic: topic, payload: payload, userProperties: message.userProperties)
                if isTracing, !message.userProperties.isEmpty, topic.eventType.isOneWay {
                    traceReceived(topic, userProperties: message.userProperties)
                }
                for sink in sinks { sink(event) }
            }
        }
    }

    /// ``CoatyTopic/classify(_:)``, remembering the last topic: a stream of events from one
    /// publisher repeats its topic, which is then compared instead of parsed again.
    func classify(_ topic: String) -> CoatyTopic.Classification {
        // Compared byte for byte: MQTT topics are byte strings (`==` on `String` would also take
        // canonically equivalent spellings for equal).
        func sameBytes(_ a: String, _ b: String) -> Bool {
            var a = a
            var b = b
            return a.withUTF8 { x in
                b.withUTF8 { y in
                    guard x.count == y.count else { return false }
                    guard let p = x.baseAddress, let q = y.baseAddress else { return true }
                    return memcmpBytes(p, q, x.count)
                }
            }
        }
        if let hit = lastTopic.withLock({ last in last.flatMap { sameBytes($0.topic, topic) ? $0.classification : nil }
        }) {
            return hit
        }
        var classification = CoatyTopic.classify(topic)
        if case .invalid = classification, options.brokerType.rewritesDotsInTopics,
            let restored = CoatyTopic.restoringRewrittenDots(topic)
        {
            classification = .coaty(restored)
        }
        lastTopic.withLock { $0 = (topic, classification) }
        return classification
    }

    /// Whether `message` is an extra copy delivered for a second overlapping subscription.
    ///
    /// A broker delivers the copies of one publication one after another, so the first copy is
    /// dispatched and the next `copies - 1` identical messages are dropped. Overlaps only exist
    /// while Raw observers exist, so other agents pay nothing for this check.
    func isExtraCopy(_ message: TransportMessage) -> Bool {
        state.withLock { state in
            guard !state.rawRoutes.isEmpty || !state.expectedCopies.isEmpty else { return false }
            let key = MessageKey(topic: message.topic, payload: message.payload)
            if let remaining = state.expectedCopies[key] {
                state.expectedCopies[key] = remaining > 1 ? remaining - 1 : nil
                return true
            }
            guard !state.rawRoutes.isEmpty else { return false }
            var copies = 0
            for filter in [state.established, state.directResponseFilters].joined()
            where MQTTTopicFilter.matches(topic: message.topic, filter: filter) {
                copies += 1
            }
            if copies > 1 { state.expectedCopies[key] = copies - 1 }
            return false
        }
    }

    func decode(_ bytes: [UInt8], topic: CoatyTopic) -> IncomingEvent.Payload? {
        if bytes.count > options.maximumPayloadSize, topic.eventType != .ioValue, topic.eventType != .raw {
            counters.invalidPayload()
            logger.warning(
                "Dropped an event whose payload exceeds the size limit (Options.maximumPayloadSize)",
                metadata: [
                    "topic": "\(topic.name)", "bytes": "\(bytes.count)", "limit": "\(options.maximumPayloadSize)",
                ]
            )
            return nil
        }
        do throws(CommunicationEventDataError) {
            return try IncomingEvent.Payload(received: bytes, eventType: topic.eventType, registry: registry)
        } catch {
            counters.invalidPayload()
            logger.debug(
                "Dropped an event with an invalid payload",
                metadata: ["topic": "\(topic.name)", "error": "\(error)"]
            )
            return nil
        }
    }

    // MARK: Built-in responders

    func registerBuiltInResponders() {
        guard let filter = try? subscriptionFilter(.discover) else { return }
        let identity = identityJSON
        let identityId = identity.objectId
        let sink: EventSink = { [weak self] event in
            guard let self, case .discover(let data) = event.payload else { return }
            guard let correlationId = event.topic.correlationUUID else { return }
            let asksIdentity =
                (data.coreTypes?.contains(.identity) ?? false)
                || (data.objectTypes?.contains(CoreType.identity.objectType) ?? false)
                || data.objectId == identityId
            var answers: [AnyCoatyObject] = []
            if asksIdentity, self.options.announcesIdentity, data.matches(identity) { answers.append(identity) }
            if data.coreTypes?.contains(.ioNode) ?? false {
                for node in self.state.withLock({ $0.ioNodes }) {
                    if let wrapped = try? AnyCoatyObject(node), data.matches(wrapped) { answers.append(wrapped) }
                }
            }
            guard !answers.isEmpty else { return }
            self.spawn { [answers] in
                for answer in answers {
                    let payload = ResolveEventData(unchecked: answer)
                    try? await self.publishResponse(.resolve, correlationId: correlationId, payload: payload.json)
                }
            }
        }
        state.withLock { state in
            state.refCounts[filter, default: 0] += 1
            let id = state.makeToken()
            state.setRoute("DSC", token: id, sink: sink)
        }
    }
}
