import CoatyCore
import CoatyStore
import CoatySync
import Logging
import Metrics
import ServiceLifecycle
import Synchronization
import Tracing

extension CoatyRecorder {
    // MARK: Answering

    /// Lets the observers hand over what the manager delivered before the request (it dispatches
    /// messages in arrival order, so those events are already in the observers' buffers), then
    /// waits until all of it is committed.
    /// - Parameter finalHandOver: the hand-over when the recorder stops: it waits (up to a minute)
    ///   although a stop was requested.
    func settleAndFlush(finalHandOver: Bool = false) async {
        await settle(finalHandOver: finalHandOver)
        await queue.flush()
    }

    /// Waits until the ingest observations handed to the queue every event the manager delivered
    /// to them before now (what they held or had taken), except observation `excluded` (the
    /// caller's own), without waiting for the commit. Exact: each observation's progress says how
    /// many events it was given, and each pump counts what it handed over.
    func settle(except excluded: Int? = nil, finalHandOver: Bool = false) async {
        let deadline = ContinuousClock.now + .seconds(60)
        let sources = ingestProgress.withLock { $0 }
        var targets: [(index: Int, count: UInt64)] = []
        targets.reserveCapacity(sources.count)
        for (index, progress) in sources where index != excluded {
            let sample = progress()
            targets.append((index, sample.taken + UInt64(sample.waiting)))
        }
        while true {
            let seen = progress.generation
            let reached = handed.withLock { counts in targets.allSatisfy { counts[$0.index, default: 0] >= $0.count } }
            if reached { return }
            if Task.isCancelled { return }
            if finalHandOver ? ContinuousClock.now > deadline : control.withLock({ $0.stopRequested }) { return }
            if queue.hasBlockedProducers {
                // A pump waits for room: the writer makes it (and the pump's hand-over signals).
                await queue.flush()
            } else if finalHandOver {
                await progress.wait(beyond: seen, until: deadline)
            } else {
                await progress.wait(beyond: seen)
            }
        }
    }

    /// The most Queries answered at once: a Query of many conditions or over many rows does not
    /// hold up the ones behind it, and a flood of them takes no more than this many of the store's
    /// readers (GRDB's pool has five).
    static let concurrentAnswers = 4

    /// Answers each request in a child task of its own, at most ``concurrentAnswers`` at once;
    /// the next request is taken when one of them is answered. The children inherit the caller's
    /// executor preference (the delivery executor).
    func answerConcurrently<Request: Sendable>(
        _ requests: EventObservation<Request>,
        _ answer: @escaping @Sendable (Request) async -> Void
    ) async {
        await withTaskGroup(of: Void.self) { group in
            var running = 0
            for await request in requests {
                if running == Self.concurrentAnswers {
                    await group.next()
                    running -= 1
                }
                group.addTask { await answer(request) }
                running += 1
            }
        }
    }

    func answer(_ queries: EventObservation<QueryEvent>) async {
        await answerConcurrently(queries) { query in await self.answer(query) }
    }

    /// Runs one step of answering a request in a span of its own, a child of the request's handling span (in the
    /// request's ``QueryEvent/withTraceContext(_:)``), when the manager traces; else just runs it.
    func step<Result>(
        _ name: String,
        _ body: (any Span) async throws -> Result
    ) async rethrows -> Result {
        guard manager.isTracing else { return try await body(NoOpTracer.NoOpSpan(context: .topLevel)) }
        return try await manager.tracer.withSpan("coaty.record " + name, ofKind: .internal) { span in
            try await body(span)
        }
    }

    func answer(_ query: QueryEvent) async {
        await query.withTraceContext { await answerInContext(query) }
    }

    /// Answers a Query: its spans (settle, SQL, decode) are children of the request's.
    private func answerInContext(_ query: QueryEvent) async {
        let start = ContinuousClock.now
        await step("settle") { _ in await settleAndFlush() }
        let scope: StoreScope
        if let objectTypes = query.data.objectTypes {
            scope = .collections(objectTypes)
        } else {
            scope = .coreTypes((query.data.coreTypes ?? []).map(\.rawValue))
        }
        await indexIfUseful(query.data)
        do {
            let json = try await step("store query") { span in
                let json = try await storage.objects(
                    in: scope,
                    filter: query.data.objectFilter,
                    joins: query.data.objectJoinConditions?.conditions ?? []
                )
                span.attributes["coaty.store.rows"] = json.count
                return json
            }
            let objects = await step("decode") { _ in decode(json) }
            try await query.retrieve(objects: objects)
            metrics.answered(.query, since: start)
            stats.withLock { $0.answeredQueries += 1 }
            emit(.retrieved(correlationId: query.topic.correlationUUID, count: objects.count))
        } catch {
            answerFailed(.query, "answer a Query", error)
        }
    }

    /// Counts, logs and reports a request that could not be answered (`what`: "answer a Query").
    func answerFailed(_ request: RecorderMetrics.Request, _ what: String, _ error: any Error) {
        metrics.failed(request)
        stats.withLock { $0.failedAnswers += 1 }
        logger.error("Could not \(what)", metadata: ["error": "\(Self.describe(error))"])
        emit(.failed(message: "could not \(what): \(Self.describe(error))"))
    }

    /// Creates the automatic indexes a Query of one object type calls for
    /// (``Configuration/automaticIndexesPerObjectType``): on its first ordering property, and on
    /// the properties its conditions search (``indexedSearchProperties(of:)``).
    func indexIfUseful(_ data: QueryEventData) async {
        guard let indexing, configuration.automaticIndexesPerObjectType > 0,
            let objectTypes = data.objectTypes, objectTypes.count == 1
        else { return }
        let objectType = objectTypes[0]
        var properties: [String] = []
        if let path = data.objectFilter?.orderByProperties?.first?.property.path, path.count == 1 {
            properties.append(path[0])
        }
        properties += Self.indexedSearchProperties(of: data.objectFilter?.conditions).sorted()
        for property in properties {
            guard JSONIndexDeclarations.isIndexable(property), !PromotedColumns.names.contains(property),
                !indexing.hasIndex(collection: objectType, property: property)
            else { continue }
            let admitted = automaticIndexes.withLock { indexes -> Bool in
                guard indexes[objectType, default: []].count < configuration.automaticIndexesPerObjectType else {
                    return false
                }
                return indexes[objectType, default: []].insert(property).inserted
            }
            guard admitted else { continue }
            do {
                try await indexing.createIndex(collection: objectType, property: property)
                logger.info(
                    "Created an index for Queries on a property",
                    metadata: ["objectType": "\(objectType)", "property": "\(property)"]
                )
            } catch {
                logger.warning(
                    "Could not create an index",
                    metadata: ["objectType": "\(objectType)", "property": "\(property)", "error": "\(error)"]
                )
            }
        }
    }

    /// The top-level properties whose conditions an index can search: compared with a number
    /// (`LessThan` … `GreaterThanOrEqual`, `Between`, `Equals`) or equal to strings (`Equals`,
    /// `In`). Of an and-ed list every such property; of an or-ed list only a property that every
    /// condition searches (otherwise each branch but one still reads every row).
    static func indexedSearchProperties(of conditions: ObjectFilterConditions?) -> Set<String> {
        func searches(_ expression: ObjectFilterExpression) -> Bool {
            switch expression.operator {
            case .lessThan, .lessThanOrEqual, .greaterThan, .greaterThanOrEqual:
                return expression.operand1?.doubleValue != nil
            case .between:
                return expression.operand1?.doubleValue != nil && expression.operand2?.doubleValue != nil
            case .equals:
                return expression.operand1?.doubleValue != nil || expression.operand1?.stringValue != nil
            case .in:
                guard case .array(let values)? = expression.operand1 else { return false }
                return !values.isEmpty && values.allSatisfy { $0.stringValue != nil }
            default:
                return false
            }
        }
        let searched = SQLText.properties(of: conditions, where: searches)
        guard case .or(let list)? = conditions else { return searched }
        let all = Set(list.map { $0.property.path.joined(separator: ".") })
        return all.count == 1 ? searched : []
    }

    /// Discovers are answered one after another, on their own loop beside the Queries': each is
    /// one lookup of an indexed column (bounded), and the round trip stays free of a task hop.
    func answer(_ discovers: EventObservation<DiscoverEvent>) async {
        for await discover in discovers { await answer(discover) }
    }

    func answer(_ discover: DiscoverEvent) async {
        await discover.withTraceContext { await answerInContext(discover) }
    }

    /// Answers a Discover by id: its spans (settle, lookup, decode) are children of the request's.
    private func answerInContext(_ discover: DiscoverEvent) async {
        let start = ContinuousClock.now
        let data = discover.data
        let lookup: (property: String, value: String)
        if let objectId = data.objectId {
            lookup = ("objectId", objectId.uuidString)
        } else if let externalId = data.externalId {
            lookup = ("externalId", externalId)
        } else {
            return  // by types only: not answered from the store
        }
        await step("settle") { _ in await settleAndFlush() }
        do {
            let rows = try await step("store lookup") { span in
                let rows = try await storage.objectsWithText(where: lookup.property, equals: lookup.value)
                span.attributes["coaty.store.rows"] = rows.count
                return rows
            }
            // Decoded one by one up to the first match (an externalId may select many), each
            // keeping its stored text: the Resolve carries those bytes as they were received.
            let object = await step("decode") { _ in rows.lazy.compactMap(decode).first(where: data.matches) }
            guard let object else { return }
            try await discover.resolve(object: object)
            metrics.answered(.discover, since: start)
            stats.withLock { $0.answeredDiscovers += 1 }
            emit(.resolved(correlationId: discover.topic.correlationUUID, objectId: object.objectId))
        } catch {
            answerFailed(.discover, "answer a Discover", error)
        }
    }

    func answer(_ updates: EventObservation<UpdateEvent<AnyCoatyObject>>) async {
        for await update in updates {
            let start = ContinuousClock.now
            await settleAndFlush()
            let receipt = ReceiptMetadata(sourceId: update.sourceId, eventType: "Update", topic: update.topic.name)
            do {
                guard let json = try await storage.update(update.object, receipt: receipt) else {
                    stats.withLock { $0.ignoredUpdates += 1 }
                    continue
                }
                let object = try manager.registry.decode(json)
                try await update.complete(object: object)
                metrics.answered(.update, since: start)
                stats.withLock { $0.completedUpdates += 1 }
                emit(.updated(objectId: object.objectId, objectType: object.objectType, receipt: receipt))
            } catch {
                answerFailed(.update, "apply an Update", error)
            }
        }
    }

    /// An error as one bounded line for a log: a backend error may quote a whole generated
    /// statement (megabytes for a Query of many conditions), and anyone on the bus can send one.
    static func describe(_ error: any Error) -> String {
        var text = String(describing: error).split(whereSeparator: \.isNewline).joined(separator: " ")
        let limit = 300
        if text.count > limit {
            let more = text.count - limit
            text = String(text.prefix(limit)) + "… (\(more) more characters)"
        }
        return text
    }

    /// Decodes a stored object, keeping its text; `nil` (logged) when the row is no Coaty object.
    func decode(_ stored: StoredObject) -> AnyCoatyObject? {
        do {
            // Given as its text alone: validated and decoded on the text, as a received object.
            if stored.parsed == nil, let text = stored.text { return try manager.registry.decode(storedText: text) }
            guard let text = stored.text, case .object(let json) = stored.json else {
                return try manager.registry.decode(stored.json)
            }
            return try manager.registry.decode(json, text: text)
        } catch {
            logger.warning(
                "Skipped a stored row that is not a Coaty object",
                metadata: ["error": "\(Self.describe(error))"]
            )
            return nil
        }
    }

    /// Decodes stored JSON into objects, skipping (and logging) rows that are no Coaty object.
    func decode(_ json: [JSONValue]) -> [AnyCoatyObject] {
        json.compactMap { decode(StoredObject(json: $0)) }
    }
}
