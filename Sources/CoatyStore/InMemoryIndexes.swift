import CoatyModel
import CoatyFilter
import CoatySync
import Synchronization

/// A property index of the in-memory backend: the keys of one collection by the value of one
/// top-level property, answering which rows *may* satisfy a condition on it. Queries still pass
/// those rows through ``CoatyFilter/ObjectMatcher``, so an index only ever narrows the rows a
/// query examines and never changes its answer.
///
/// Candidate sets follow Coaty's (JavaScript's) comparisons: a string equals only a string with
/// the same code units (a Swift `==` bucket is a superset); a number compares numerically with
/// numbers, while a relational operator converts strings, booleans, `null` and arrays to numbers
/// first, so every value that is not a number below 2^53 stays a candidate of a numeric
/// comparison; a missing property satisfies none of these operators.
struct InMemoryPropertyIndex: Sendable {
    /// String values, by value.
    private(set) var strings: [String: Set<String>] = [:]
    /// Number values below 2^53 in magnitude, by key.
    private(set) var numbers: [String: Double] = [:]
    /// Keys whose value is present and not such a number (strings among them).
    private(set) var others: Set<String> = []
    /// The numbers sorted, built on the first range lookup after a change and shared by the
    /// snapshots of this version.
    private var sorted = SortedNumbers()

    /// The value a key is indexed under.
    private enum Slot {
        case string(String)
        case number(Double)
        case other
    }

    private static func slot(_ value: JSONValue) -> Slot {
        switch value {
        case .string(let s): return .string(s)
        case .int, .double:
            if let number = value.doubleValue, abs(number) < 9_007_199_254_740_992 { return .number(number) }
            return .other
        default: return .other
        }
    }

    /// Sets the value of `key` (`nil`: the row is gone or lacks the property), replacing `old`.
    mutating func update(key: String, old: JSONValue?, new: JSONValue?) {
        if let old {
            switch Self.slot(old) {
            case .string(let s):
                strings[s]?.remove(key)
                if strings[s]?.isEmpty == true { strings[s] = nil }
                others.remove(key)
            case .number:
                numbers[key] = nil
                sorted = SortedNumbers()
            case .other:
                others.remove(key)
            }
        }
        if let new {
            switch Self.slot(new) {
            case .string(let s):
                strings[s, default: []].insert(key)
                others.insert(key)
            case .number(let n):
                numbers[key] = n
                sorted = SortedNumbers()
            case .other: others.insert(key)
            }
        }
    }

    /// The keys that may satisfy `expression`, or `nil` when the index cannot narrow it.
    func candidates(_ expression: ObjectFilterExpression) -> Set<String>? {
        func number(_ operand: JSONValue?) -> Double? {
            guard let operand, operand.isNumber, let value = operand.doubleValue, abs(value) < 9_007_199_254_740_992
            else { return nil }
            return value
        }
        switch expression.operator {
        case .equals:
            if case .string(let s)? = expression.operand1 { return strings[s] ?? [] }
            guard let x = number(expression.operand1) else { return nil }
            return keys(from: x, to: x).union(others)
        case .in:
            guard case .array(let elements)? = expression.operand1 else { return nil }
            var keys: Set<String> = []
            for element in elements {
                guard case .string(let s) = element else { return nil }
                keys.formUnion(strings[s] ?? [])
            }
            return keys
        case .lessThan, .lessThanOrEqual:
            guard let x = number(expression.operand1) else { return nil }
            return keys(from: -.infinity, to: x).union(others)
        case .greaterThan, .greaterThanOrEqual:
            guard let x = number(expression.operand1) else { return nil }
            return keys(from: x, to: .infinity).union(others)
        case .between:
            guard let a = number(expression.operand1), let b = number(expression.operand2) else { return nil }
            return keys(from: min(a, b), to: max(a, b)).union(others)
        default:
            return nil
        }
    }

    /// The keys of the numbers in `low...high`.
    private func keys(from low: Double, to high: Double) -> Set<String> {
        let sorted = sorted.numbers { numbers.map { ($0.value, $0.key) }.sorted { $0.0 < $1.0 } }
        var lower = 0
        var upper = sorted.count
        while lower < upper {
            let middle = (lower + upper) / 2
            if sorted[middle].0 < low { lower = middle + 1 } else { upper = middle }
        }
        var keys: Set<String> = []
        var i = lower
        while i < sorted.count, sorted[i].0 <= high {
            keys.insert(sorted[i].1)
            i += 1
        }
        return keys
    }
}

/// The sorted numbers of one version of an index, built once by whichever reader asks first.
final class SortedNumbers: Sendable {
    private let cache = CoatyMutex<[(Double, String)]?>(nil)

    func numbers(_ build: () -> [(Double, String)]) -> [(Double, String)] {
        cache.withLock { cached in
            if let cached { return cached }
            let built = build()
            cached = built
            return built
        }
    }
}

extension InMemoryState {
    /// Applies a row change to the indexes of its collection.
    mutating func reindex(_ index: StoreIndex, old: StoreRow?, new: StoreRow?) {
        guard let properties = indexedProperties[index.collection] else { return }
        for property in properties {
            let key = JSONIndexDeclarations.Key(collection: index.collection, property: property)
            indexes[key]?.update(key: index.key, old: old?.object[property], new: new?.object[property])
        }
    }

    /// Creates an index from the rows stored so far (nothing when it exists).
    mutating func createIndex(collection: String, property: String) {
        let declaration = JSONIndexDeclarations.Key(collection: collection, property: property)
        guard indexes[declaration] == nil else { return }
        var index = InMemoryPropertyIndex()
        for (storeIndex, entry) in entries where storeIndex.collection == collection {
            index.update(key: storeIndex.key, old: nil, new: entry.row.object[property])
        }
        indexes[declaration] = index
        indexedProperties[collection, default: []].append(property)
    }

    /// The keys of a query's rows that its conditions can have, narrowed by the indexes of its
    /// one collection; `nil` when no index narrows it (every row in scope is examined then).
    func indexedCandidates(_ query: StoreQuery) -> Set<String>? {
        let collection: String
        switch query.scope {
        case .collection(let name): collection = name
        case .collections(let names) where names.count == 1: collection = names[0]
        default: return nil
        }
        guard indexedProperties[collection] != nil, let conditions = query.filter?.conditions else { return nil }
        func candidates(_ condition: ObjectFilterCondition) -> Set<String>? {
            let path = condition.property.path
            guard path.count == 1,
                let index = indexes[JSONIndexDeclarations.Key(collection: collection, property: path[0])]
            else { return nil }
            return index.candidates(condition.expression)
        }
        switch conditions {
        case .condition(let condition):
            return candidates(condition)
        case .and(let list):
            var narrowed: Set<String>?
            for condition in list {
                guard let keys = candidates(condition) else { continue }
                narrowed = narrowed.map { $0.intersection(keys) } ?? keys
            }
            return narrowed
        case .or(let list):
            guard !list.isEmpty else { return nil }
            var union: Set<String> = []
            for condition in list {
                guard let keys = candidates(condition) else { return nil }
                union.formUnion(keys)
            }
            return union
        }
    }
}
