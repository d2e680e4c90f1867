/// An encoder or decoder that knows its parent and its key: the coding path is walked up the
/// chain only when someone asks (errors, custom coding code), never stored.
protocol CodingPathNode: AnyObject {
    var parent: Self? { get }
    var key: (any CodingKey)? { get }
}

extension CodingPathNode {
    /// The keys from the root value down to this one.
    var pathFromRoot: [any CodingKey] {
        var keys: [any CodingKey] = []
        var node: Self? = self
        while let current = node {
            if let key = current.key { keys.append(key) }
            node = current.parent
        }
        return keys.reversed()
    }
}
